/* cudaemu_streams.cpp — the emulator's asynchronous execution: streams as queues of work that runs
 * later, points in them (which events name, cudart_event.cpp), and the drain that runs queued
 * work when the host waits.
 *
 * A kernel launch, copy, fill, GEMM or collective is queued on its stream and runs only when the
 * host needs it: at a synchronising call (stream, event or device synchronize, a blocking copy,
 * cudaFree), or one operation at a time at an event or stream query. So a kernel reads its
 * arguments' memory when it runs, not when it was launched, and a host buffer reused before its
 * copy ran shows up as wrong data, as on a GPU. A drain runs only what its target needs: the
 * target stream's queue, and through cudaStreamWaitEvent (and the legacy default stream's
 * implicit waits) the other streams' work up to the awaited point. Streams with work ready
 * interleave in the order DDP_CUDA_EMU_ORDER picks (forward: the op issued first; reverse: the op
 * issued last first; random:SEED), so a missing wait between two streams reads stale data, or
 * overwrites data still to be read, under one of the orders. A GPU also finishes work while its
 * host is busy elsewhere (inside an MPI call, say, that a peer can only join once this device has
 * run its collective): a progress thread runs everything queued once no host thread has queued or
 * waited for work for DDP_CUDA_EMU_PROGRESS_MS (default 20; 0 turns it off, for tests that need
 * the host's timing to be irrelevant). Work marked issuer-only (the NCCL shim's MPI collectives)
 * runs only on the thread that queued it or the progress thread; a query from another thread (a
 * watchdog) reports it as not ready. One thread executes at a time; device memory is
 * host-accessible only while it does (cudart_memory.cpp). Streams belong to the device current
 * when they were made, and using them from a thread whose current device differs is an error.
 * Must not know what the work does. */
#include "cudaemu_internal.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "runtime/base/clock.h"

typedef std::shared_ptr<CUstream_st> stream_ref;

namespace ddp_cudaemu {
struct queued_op {
    uint64_t seq;
    const char *what;             /* what reports name: a kernel, "cudaMemcpyAsync", ... */
    std::function<void()> work;   /* empty for a wait */
    stream_ref wait_stream;       /* a wait: until wait_stream has run op wait_seq */
    uint64_t wait_seq;
    bool issuer_only;
    pthread_t issuer;
    bool check_bounds;            /* touches device memory: check the allocations' bounds after */
};
} /* namespace ddp_cudaemu */

struct CUstream_st {
    unsigned flags;
    int device;
    bool legacy;                  /* a device's legacy default stream (handle 0) */
    uint64_t id;                  /* creation order */
    bool live;                    /* not destroyed (its queue still runs to the end) */
    std::deque<ddp_cudaemu::queued_op> queue;
    uint64_t done_seq, last_seq;  /* of the last op run / queued */
};

namespace ddp_cudaemu {

/* Never destroyed: the progress thread may still look at them while the process exits. */
static std::mutex &engine_lock = *new std::mutex;                   /* every field below */
static std::condition_variable &engine_changed = *new std::condition_variable; /* an op ran, or the executor left */
static auto &streams = *new std::map<CUstream_st *, stream_ref>;   /* live, or destroyed with work queued */
static auto &legacy_streams = *new std::map<int, CUstream_st *>;
static uint64_t next_seq = 1, next_stream_id = 1;
static bool executing;                         /* some thread is running an op */
static pthread_t executor;
static thread_local const char *running_op;    /* for fault reports */
static thread_local bool is_progress_thread;
static double last_host_activity_s;            /* a host thread queued work or waited for it */
static bool process_exiting;                   /* set at exit: the progress thread stops */

const char *op_running_on_this_thread() { return running_op; }

/* ---- streams and handles --------------------------------------------------------------- */

static stream_ref new_stream(int device, unsigned flags, bool legacy)
{
    stream_ref s(new CUstream_st{flags, device, legacy, next_stream_id++, true, {}, 0, 0});
    streams[s.get()] = s;
    return s;
}

/* The stream a handle names, on the caller's device; nullptr after reporting an error.
 * Called with engine_lock held. */
static CUstream_st *resolve(cudaStream_t handle, int device, const char *fn)
{
    if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
        auto it = legacy_streams.find(device);
        if (it == legacy_streams.end())
            it = legacy_streams.emplace(device, new_stream(device, cudaStreamDefault, true).get()).first;
        return it->second;
    }
    auto it = streams.find(handle);
    if (it == streams.end() || !it->second->live) {
        fail(cudaErrorInvalidResourceHandle, "%s: stream %p is not a live stream", fn, static_cast<void *>(handle));
        return nullptr;
    }
    if (handle->device != device) {
        fail(cudaErrorInvalidResourceHandle, "%s: stream %p belongs to device %d but the calling thread's "
             "current device is %d (call cudaSetDevice(%d) in this thread first)", fn,
             static_cast<void *>(handle), handle->device, device, handle->device);
        return nullptr;
    }
    return handle;
}

/* The stream a handle names on the calling thread's device, with engine_lock held by the caller;
 * nullptr, with the error in *err, after reporting why not. */
static CUstream_st *stream_of_caller(cudaStream_t handle, const char *fn, cudaError_t *err)
{
    int device = calling_device(fn);
    CUstream_st *s = device < 0 ? nullptr : resolve(handle, device, fn);
    *err = device < 0 ? cudaErrorInvalidDevice : s ? cudaSuccess : cudaErrorInvalidResourceHandle;
    return s;
}

bool stream_is_valid(cudaStream_t stream)
{
    int device = calling_device("stream use");
    if (device < 0)
        return false;
    std::lock_guard<std::mutex> hold(engine_lock);
    return resolve(stream, device, "stream use") != nullptr;
}

/* ---- queueing ------------------------------------------------------------------------- */

void start_progress_thread();

static void push(CUstream_st *s, queued_op op)
{
    op.seq = next_seq++;
    s->last_seq = op.seq;
    s->queue.push_back(std::move(op));
}

static void push_wait(CUstream_st *s, const stream_ref &on, uint64_t seq)
{
    if (on.get() == s || on->done_seq >= seq)
        return;
    push(s, queued_op{0, "cudaStreamWaitEvent", {}, on, seq, false, pthread_t(), false});
}

/* The legacy default stream waits for, and is waited for by, every blocking stream of its device. */
static void legacy_waits(CUstream_st *s)
{
    if (s->flags & cudaStreamNonBlocking)
        return;
    if (s->legacy) {
        for (auto &kv : streams)
            if (kv.second.get() != s && kv.second->device == s->device && !kv.second->legacy &&
                !(kv.second->flags & cudaStreamNonBlocking) && kv.second->last_seq > kv.second->done_seq)
                push_wait(s, kv.second, kv.second->last_seq);
        return;
    }
    auto it = legacy_streams.find(s->device);
    if (it != legacy_streams.end() && it->second->last_seq > it->second->done_seq)
        push_wait(s, streams[it->second], it->second->last_seq);
}

cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> work, unsigned flags,
                    const char *fn, queued_at *where)
{
    std::lock_guard<std::mutex> hold(engine_lock);
    cudaError_t err;
    CUstream_st *s = stream_of_caller(stream, fn, &err);
    if (!s)
        return err;
    legacy_waits(s);
    push(s, queued_op{0, what, std::move(work), nullptr, 0, (flags & OP_ISSUER_ONLY) != 0, pthread_self(),
                      !(flags & OP_MARKER)});
    last_host_activity_s = monotonic_s();
    start_progress_thread();
    if (where)
        *where = queued_at{streams[s], s->last_seq};
    return cudaSuccess;
}

cudaError_t enqueue_wait(cudaStream_t stream, const queued_at &until, const char *fn)
{
    std::lock_guard<std::mutex> hold(engine_lock);
    cudaError_t err;
    CUstream_st *s = stream_of_caller(stream, fn, &err);
    if (s)
        push_wait(s, until.stream, until.seq);
    return err;
}

/* The tail of every stream of device (every device when -1) with work not yet run. Called with
 * engine_lock held. */
static std::vector<queued_at> pending_tails(int device)
{
    std::vector<queued_at> tails;
    for (auto &kv : streams)
        if ((device < 0 || kv.second->device == device) && kv.second->last_seq > kv.second->done_seq)
            tails.push_back(queued_at{kv.second, kv.second->last_seq});
    return tails;
}

/* ---- the drain ------------------------------------------------------------------------- */

/* The stream order of one drain: DDP_CUDA_EMU_ORDER (a malformed value was refused at launch),
 * with a different random draw per drain. */
static emu_order drain_order(const char *fn)
{
    static uint64_t drains;
    emu_order o;
    if (read_emu_order(&o, fn) && o.kind == ORDER_RANDOM)
        o.seed = o.seed * 0x9e3779b97f4a7c15ull + ++drains;
    return o;
}

typedef std::map<CUstream_st *, uint64_t> need_map;

static bool reached(const std::vector<queued_at> &targets)
{
    for (const queued_at &t : targets)
        if (t.stream->done_seq < t.seq)
            return false;
    return true;
}

/* How far each stream must run for the targets: their own streams, then transitively every
 * stream an op on the way waits for. */
static need_map needed(const std::vector<queued_at> &targets)
{
    need_map need;
    for (const queued_at &t : targets)
        if (t.stream->done_seq < t.seq && need[t.stream.get()] < t.seq)
            need[t.stream.get()] = t.seq;
    for (bool grew = true; grew;) {
        grew = false;
        for (auto &kv : need)
            for (const queued_op &op : kv.first->queue) {
                if (op.seq > kv.second)
                    break;
                if (!op.work && op.wait_stream->done_seq < op.wait_seq && need[op.wait_stream.get()] < op.wait_seq) {
                    need[op.wait_stream.get()] = op.wait_seq;
                    grew = true;
                }
            }
    }
    return need;
}

enum pick_result { PICKED, BLOCKED_ON_OTHER_THREAD, NOTHING };

/* Retires satisfied waits, then picks a stream whose next op is needed and may run on this thread. */
static pick_result pick(const need_map &need, emu_order &order, CUstream_st **out)
{
    std::vector<CUstream_st *> ready;
    bool blocked = false;
    for (const auto &kv : need) {
        CUstream_st *s = kv.first;
        while (!s->queue.empty() && !s->queue.front().work && s->queue.front().seq <= kv.second &&
               s->queue.front().wait_stream->done_seq >= s->queue.front().wait_seq) {
            s->done_seq = s->queue.front().seq;
            s->queue.pop_front();
        }
        if (s->queue.empty() || s->queue.front().seq > kv.second || !s->queue.front().work)
            continue;
        if (s->queue.front().issuer_only && !is_progress_thread &&
            !pthread_equal(s->queue.front().issuer, pthread_self())) {
            blocked = true;
            continue;
        }
        ready.push_back(s);
    }
    if (ready.empty())
        return blocked ? BLOCKED_ON_OTHER_THREAD : NOTHING;
    CUstream_st *best = ready[0];
    if (order.kind == ORDER_RANDOM) {
        best = ready[next_random(&order.seed) % ready.size()];
    } else { /* forward: the op issued first (program order); reverse: the op issued last */
        for (CUstream_st *s : ready)
            if (order.kind == ORDER_FORWARD ? s->queue.front().seq < best->queue.front().seq
                                : s->queue.front().seq > best->queue.front().seq)
                best = s;
    }
    *out = best;
    return PICKED;
}

static void release_finished_streams()
{
    for (auto it = streams.begin(); it != streams.end();)
        it = !it->second->live && it->second->queue.empty() ? streams.erase(it) : std::next(it);
}

/* Runs the front op of s with the lock released. */
static void run_front(std::unique_lock<std::mutex> &lock, CUstream_st *s)
{
    queued_op op = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    running_op = op.what;
    op.work();
    if (op.check_bounds)
        check_allocation_bounds(op.what);
    running_op = nullptr;
    lock.lock();
    s->done_seq = op.seq;
}

[[noreturn]] static void report_stuck(const std::vector<queued_at> &targets, const char *fn)
{
    fprintf(stderr, "cudaemu: %s waits for work that can never run:", fn);
    for (const queued_at &t : targets)
        fprintf(stderr, " stream %llu up to op %llu (ran up to %llu, %zu queued);", (unsigned long long)t.stream->id,
                (unsigned long long)t.seq, (unsigned long long)t.stream->done_seq, t.stream->queue.size());
    fputc('\n', stderr);
    abort();
}

/* Runs queued work until the targets are reached (blocking) or one op has run (a query).
 * Returns whether the targets are reached. The progress thread drains non-blocking, without the
 * one-op limit. */
static bool drain(const std::vector<queued_at> &targets, bool blocking, const char *fn)
{
    std::unique_lock<std::mutex> lock(engine_lock);
    if (blocking)
        last_host_activity_s = monotonic_s();
    emu_order order = drain_order(fn);
    const need_map need = needed(targets); /* fixed: later ops lie beyond what the targets need */
    bool opened = false, ran = false;
    while (!reached(targets) && !(ran && !blocking && !is_progress_thread)) {
        if (executing && !pthread_equal(executor, pthread_self())) {
            if (!blocking)
                break;
            engine_changed.wait(lock);
            continue;
        }
        CUstream_st *s = nullptr;
        pick_result r = pick(need, order, &s);
        if (r == NOTHING && reached(targets))
            break;
        if (r == NOTHING)
            report_stuck(targets, fn);
        if (r == BLOCKED_ON_OTHER_THREAD) {
            if (!blocking)
                break;
            engine_changed.wait(lock); /* the issuing thread runs it when it next waits */
            continue;
        }
        executing = true;
        executor = pthread_self();
        if (!opened)
            device_memory_access(true);
        opened = ran = true;
        run_front(lock, s);
        engine_changed.notify_all();
    }
    if (opened) {
        device_memory_access(false);
        executing = false;
        engine_changed.notify_all();
    }
    release_finished_streams();
    return reached(targets);
}

/* ---- the progress thread ---------------------------------------------------------------- */

static long progress_ms()
{
    const char *env = getenv("DDP_CUDA_EMU_PROGRESS_MS");
    if (!env || !*env)
        return 20;
    char *end;
    long ms = strtol(env, &end, 10);
    if (*end != '\0' || ms < 0) {
        fprintf(stderr, "cudaemu: DDP_CUDA_EMU_PROGRESS_MS=%s: expected milliseconds (0 = off)\n", env);
        abort();
    }
    return ms;
}

static void *progress_main(void *)
{
    is_progress_thread = true;
    const double idle_s = (double)progress_ms() / 1e3;
    for (;;) {
        struct timespec nap = {0, (long)(idle_s / 2 * 1e9)};
        nanosleep(&nap, nullptr);
        std::vector<queued_at> targets;
        {
            std::lock_guard<std::mutex> hold(engine_lock);
            if (process_exiting)
                return nullptr;
            if (executing || monotonic_s() - last_host_activity_s < idle_s)
                continue;
            targets = pending_tails(-1);
        }
        if (!targets.empty())
            drain(targets, false, "the emulator's progress thread");
    }
    return nullptr;
}

static bool progress_running;

/* exit() runs other libraries' destructors (MPI's among them): queued work must not start then. */
static void stop_progress_at_exit()
{
    std::lock_guard<std::mutex> hold(engine_lock);
    process_exiting = true;
}

/* A fork()ed child has no progress thread and must not inherit a held lock. */
static void before_fork() { engine_lock.lock(); }
static void after_fork_parent() { engine_lock.unlock(); }
static void after_fork_child()
{
    engine_lock.unlock();
    progress_running = false;
}

/* Called with engine_lock held, from the first queued work on. */
void start_progress_thread()
{
    static std::once_flag atfork;
    std::call_once(atfork, [] {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        atexit(stop_progress_at_exit);
    });
    if (progress_running || progress_ms() == 0)
        return;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    progress_running = pthread_create(&t, &attr, progress_main, nullptr) == 0;
    pthread_attr_destroy(&attr);
}

/* ---- waiting -------------------------------------------------------------------------- */

cudaError_t synchronize_point(const queued_at &at, const char *fn)
{
    drain({at}, true, fn);
    return cudaSuccess;
}

bool query_point(const queued_at &at, const char *fn) { return drain({at}, false, fn); }

bool point_reached(const queued_at &at)
{
    std::lock_guard<std::mutex> hold(engine_lock);
    return at.stream->done_seq >= at.seq;
}

cudaError_t synchronize_device(int device, const char *fn)
{
    std::vector<queued_at> targets;
    {
        std::lock_guard<std::mutex> hold(engine_lock);
        targets = pending_tails(device);
    }
    drain(targets, true, fn);
    return cudaSuccess;
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

/* ---- streams --------------------------------------------------------------------------- */

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: NULL output or unknown flags 0x%x", flags);
    int device = calling_device("cudaStreamCreateWithFlags");
    if (device < 0)
        return cudaErrorInvalidDevice;
    std::lock_guard<std::mutex> hold(engine_lock);
    *pStream = new_stream(device, flags, false).get();
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }

/* Emulated streams run when something waits for them, so a priority changes nothing here. */
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    (void)priority; /* CUDA clamps values outside the range */
    return cudaStreamCreateWithFlags(pStream, flags);
}

/* Returns at once, as CUDA does; queued work still runs, in order, when something waits for it. */
cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream cannot be destroyed");
    std::lock_guard<std::mutex> hold(engine_lock);
    cudaError_t err;
    CUstream_st *s = stream_of_caller(stream, "cudaStreamDestroy", &err);
    if (!s)
        return err;
    s->live = false;
    release_finished_streams();
    return cudaSuccess;
}

static cudaError_t stream_tail(cudaStream_t stream, const char *fn, queued_at *tail)
{
    std::lock_guard<std::mutex> hold(engine_lock);
    cudaError_t err;
    CUstream_st *s = stream_of_caller(stream, fn, &err);
    if (!s)
        return err;
    *tail = queued_at{streams[s], s->last_seq};
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    count_blocking_call("cudaStreamSynchronize", __builtin_return_address(0));
    queued_at tail;
    cudaError_t err = stream_tail(stream, "cudaStreamSynchronize", &tail);
    return err == cudaSuccess ? synchronize_point(tail, "cudaStreamSynchronize") : err;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    queued_at tail;
    cudaError_t err = stream_tail(stream, "cudaStreamQuery", &tail);
    if (err != cudaSuccess)
        return err;
    return query_point(tail, "cudaStreamQuery") ? cudaSuccess : not_ready();
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    if (!flags)
        return fail(cudaErrorInvalidValue, "cudaStreamGetFlags: flags is NULL");
    std::lock_guard<std::mutex> hold(engine_lock);
    cudaError_t err;
    CUstream_st *s = stream_of_caller(hStream, "cudaStreamGetFlags", &err);
    if (!s)
        return err;
    *flags = s->flags;
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    if (!fn)
        return fail(cudaErrorInvalidValue, "cudaLaunchHostFunc: fn is NULL");
    return enqueue(stream, "cudaLaunchHostFunc", [fn, userData] { fn(userData); }, 0, "cudaLaunchHostFunc",
                   nullptr);
}

} /* extern "C" */
