# tests/launcher/netns_hosts.sh — simulated hosts for multi-node tests (sourced after lib.sh).
# netns_up N: network namespaces h1..hN, each joined to a bridge in this namespace by a veth link
# (198.18.X.i/24, the bridge .254 where mpirun listens); NS_MPI holds the ddprun flags that make
# Open MPI's rsh launcher start its daemons there through netns_rsh.sh; NS_LINK[i] is the bridge
# end of host i's link (ip link set ... down cuts it). Every host sees its own directory
# $NS_STORE/hI at $NS_RUNROOT. Exits 77 (skipped) where namespaces cannot be made. Torn down on exit.
NS_PREFIX=d$$
NS_NET=198.18.$(($$ % 250)). # RFC 2544 benchmarking addresses: never a real network
NS_STORE=$TMP/hosts
NS_RUNROOT=$TMP/run
NS_LINK=()
netns_down() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NS_PREFIX}h"); do
        ip netns pids "$ns" | xargs -r kill -9 # daemons cut off from mpirun outlive it
        ip netns del "$ns"
    done
    ip link del "${NS_PREFIX}br" 2>/dev/null
    rm -rf "$TMP"
}
netns_up() {
    local n=$1 i
    trap netns_down EXIT
    if ! ip link add "${NS_PREFIX}br" type bridge 2>"$TMP/netns.err"; then
        echo "SKIP: cannot create network namespaces here ($(cat "$TMP/netns.err"))"
        exit 77
    fi
    ip addr add "${NS_NET}254/24" dev "${NS_PREFIX}br" && ip link set "${NS_PREFIX}br" up || exit 77
    mkdir -p "$NS_RUNROOT"
    for i in $(seq "$n"); do
        ip netns add "${NS_PREFIX}h$i" &&
            ip link add "${NS_PREFIX}v$i" type veth peer name eth0 netns "${NS_PREFIX}h$i" &&
            ip link set "${NS_PREFIX}v$i" master "${NS_PREFIX}br" up &&
            ip -n "${NS_PREFIX}h$i" addr add "${NS_NET}$i/24" dev eth0 &&
            ip -n "${NS_PREFIX}h$i" link set eth0 up && ip -n "${NS_PREFIX}h$i" link set lo up || {
            echo "SKIP: cannot set up simulated host h$i"
            exit 77
        }
        NS_LINK[$i]=${NS_PREFIX}v$i
        mkdir -p "$NS_STORE/h$i"
    done
    export DDPNS_PREFIX=$NS_PREFIX DDPNS_STORE=$NS_STORE DDPNS_RUNROOT=$NS_RUNROOT
    NS_MPI=(--mca plm_rsh_agent "$DDP_SRC/tests/launcher/netns_rsh.sh" --mca plm_rsh_no_tree_spawn 1
            --mca oob_tcp_if_include "${NS_NET}0/24" --mca btl_tcp_if_include "${NS_NET}0/24")
}
