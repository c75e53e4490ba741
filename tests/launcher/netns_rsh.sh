#!/usr/bin/env bash
# netns_rsh.sh HOST COMMAND... — Open MPI's rsh agent for the simulated hosts of netns_hosts.sh:
# runs COMMAND (an orted command line, as ssh would) in HOST's network namespace, under HOST as its
# host name, with DDPNS_RUNROOT showing HOST's own directory DDPNS_STORE/HOST (private mounts), so
# hosts share no run directory, as machines without a shared filesystem.
host=$1
shift
exec nsenter --net="/run/netns/${DDPNS_PREFIX}$host" unshare --uts --mount --propagation private \
    sh -c 'hostname "$0" && mount --bind "$1/$0" "$2" && shift 2 && exec sh -c "$*"' \
    "$host" "$DDPNS_STORE" "$DDPNS_RUNROOT" "$@"
