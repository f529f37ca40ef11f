// NVSHMEM side of the GPU comparison: the rows symmem-perf measures on GPU PEs, measured
// the same way with NVSHMEM on the same GPU, printed as the same JSON lines plus
// "impl":"nvshmem". Our own program (NVSHMEM's perftests are not redistributable).
//
// Build (scripts/gpu-check.sh does this where nvcc and the nvidia-nvshmem-cu13 wheel are):
//   nvcc -O2 -rdc=true -arch=sm_90 -I$NVSHMEM/include nvshmem_perf.cu -o nvshmem_perf \
//        $NVSHMEM/lib/libnvshmem_device.a -L$NVSHMEM/lib -l:libnvshmem_host.so.3 \
//        -Xlinker -rpath,$NVSHMEM/lib -lcuda
// Run (two processes, unique-id bootstrap through a file; no MPI, no PMI):
//   ./nvshmem_perf 0 2 /tmp/uid & ./nvshmem_perf 1 2 /tmp/uid; wait
//
// Rows: device thread put/get/fetch-add (result consumed)/add+quiet latency (kernel loops),
// device barrier_all by a block, put_signal ping-pong at
// thread/warp/block scope and on a stream, host put latency, grid put bandwidth over
// sizes and cudaMemcpy device-to-device bandwidth (the limit).

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CHECK_CUDA(x)                                                                    \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "nvshmem_perf: %s failed: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static const size_t MAX_SIZE = 16 << 20;
static const size_t SWEEP[] = {8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20};
// The rotating bandwidth rows (as symmem-perf's): sizes moved through 256 MiB buffers,
// five times the H100's L2 cache, so each transfer reads and writes HBM.
static const size_t ROTATION_WINDOW = 256u << 20;
static const size_t ROTATING_SWEEP[] = {2 << 20, 16 << 20, 64 << 20};
static const int LAT_ITERS = 10000;
static const int GRID_BLOCKS = 264;
static const int GRID_THREADS = 1024;

__global__ void put_loop(char *dst, const char *src, size_t bytes, int iters, int pe) {
    for (int i = 0; i < iters; i++) {
        nvshmem_putmem(dst, src, bytes, pe);
        nvshmem_quiet();
    }
}

__global__ void get_loop(char *dst, const char *src, size_t bytes, int iters, int pe) {
    for (int i = 0; i < iters; i++) {
        nvshmem_getmem(dst, src, bytes, pe);
    }
}

// The fetched value feeds the next operand (its top bit, always 0 here, which the compiler
// cannot know), so each fetch-add waits for its result as symmem-perf's does: a discarded
// result lets the compiler emit a fire-and-forget `red` instead.
__global__ void fadd_loop(uint64_t *word, int iters, int pe) {
    uint64_t dep = 0;
    for (int i = 0; i < iters; i++) {
        dep = nvshmem_uint64_atomic_fetch_add(word, 1 + dep, pe) >> 63;
    }
    if (dep) word[1] = dep;
}

// Non-fetching add, then quiet, as symmem-perf's atomic_add row.
__global__ void add_loop(uint64_t *word, int iters, int pe) {
    for (int i = 0; i < iters; i++) {
        nvshmem_uint64_atomic_add(word, 1, pe);
        nvshmem_quiet();
    }
}

// Device barrier_all by one block on every PE, as symmem-perf's barrier_all [block] row.
__global__ void barrier_loop(int iters) {
    for (int i = 0; i < iters; i++) nvshmemx_barrier_all_block();
}

// scope 0 = thread, 1 = warp, 2 = block; first = 1 on the side that sends first.
__global__ void pingpong(char *dst, const char *src, size_t bytes, uint64_t *sig, int iters,
                         int peer, int scope, int first) {
    bool leader = scope == 1 ? (threadIdx.x % 32 == 0) : threadIdx.x == 0;
    for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
        if (!first) {
            if (leader) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, i);
            if (scope == 1) __syncwarp(); else if (scope == 2) __syncthreads();
        }
        if (scope == 1) {
            nvshmemx_putmem_signal_warp(dst, src, bytes, sig, i, NVSHMEM_SIGNAL_SET, peer);
        } else if (scope == 2) {
            nvshmemx_putmem_signal_block(dst, src, bytes, sig, i, NVSHMEM_SIGNAL_SET, peer);
        } else {
            nvshmem_putmem_signal(dst, src, bytes, sig, i, NVSHMEM_SIGNAL_SET, peer);
        }
        if (first) {
            if (leader) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, i);
            if (scope == 1) __syncwarp(); else if (scope == 2) __syncthreads();
        }
    }
}

// Put i moves bytes [i * bytes, (i + 1) * bytes) of a window of `window` bytes (a
// multiple of `bytes`), round and round; window == bytes puts the same bytes each time.
__global__ void put_bw(char *dst, const char *src, size_t bytes, int iters, int pe, size_t window) {
    size_t share = (bytes + gridDim.x - 1) / gridDim.x;
    size_t start = min(bytes, (size_t)blockIdx.x * share);
    size_t len = min(share, bytes - start);
    size_t slots = window / bytes;
    for (int i = 0; i < iters; i++) {
        size_t at = start + (i % slots) * bytes;
        nvshmemx_putmem_block(dst + at, src + at, len, pe);
        __syncthreads();
        if (threadIdx.x == 0) nvshmem_quiet();
        __syncthreads();
    }
}

static void row(const char *metric, const char *initiator, size_t size, double value,
                const char *unit) {
    printf("{\"metric\":\"%s\",\"size\":%zu,\"value\":%.4f,\"unit\":\"%s\",\"transport\":\"p2p\","
           "\"initiator\":\"%s\",\"device\":\"cuda\",\"impl\":\"nvshmem\"}\n",
           metric, size, value, unit, initiator);
    fflush(stdout);
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: nvshmem_perf RANK NRANKS UID_FILE\n");
        return 2;
    }
    int rank = atoi(argv[1]), nranks = atoi(argv[2]);
    const char *uid_file = argv[3];
    CHECK_CUDA(cudaSetDevice(0));
    nvshmemx_uniqueid_t id;
    memset(&id, 0, sizeof id);
    if (rank == 0) {
        nvshmemx_get_uniqueid(&id);
        std::string tmp = std::string(uid_file) + ".tmp";
        FILE *f = fopen(tmp.c_str(), "wb");
        fwrite(&id, sizeof id, 1, f);
        fclose(f);
        rename(tmp.c_str(), uid_file);
    } else {
        FILE *f = nullptr;
        for (int t = 0; t < 6000 && !(f = fopen(uid_file, "rb")); t++) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (!f || fread(&id, sizeof id, 1, f) != 1) {
            fprintf(stderr, "nvshmem_perf: no unique id in %s\n", uid_file);
            return 1;
        }
        fclose(f);
    }
    nvshmemx_init_attr_t attr;
    memset(&attr, 0, sizeof attr);
    nvshmemx_set_attr_uniqueid_args(rank, nranks, &id, &attr);
    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    int me = nvshmem_my_pe(), peer = me == 0 ? 1 : 0;

    char *big = (char *)nvshmem_malloc(MAX_SIZE);
    char *src = (char *)nvshmem_malloc(MAX_SIZE);
    uint64_t *sig = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
    uint64_t *word = (uint64_t *)nvshmem_calloc(2, sizeof(uint64_t));
    CHECK_CUDA(cudaMemset(src, 0x5a, MAX_SIZE));
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    nvshmem_barrier_all();

    // One timed launch on PE 0 (the others wait at the barrier): seconds.
    auto time_pe0 = [&](auto launch) {
        nvshmem_barrier_all();
        double t = 0;
        if (me == 0) {
            double t0 = now_s();
            launch();
            CHECK_CUDA(cudaDeviceSynchronize());
            t = now_s() - t0;
        }
        nvshmem_barrier_all();
        return t;
    };
    // A ping-pong: both PEs launch; PE 0's wall time.
    auto time_both = [&](auto launch) {
        CHECK_CUDA(cudaMemset(sig, 0, sizeof(uint64_t)));
        CHECK_CUDA(cudaDeviceSynchronize());
        nvshmem_barrier_all();
        double t0 = now_s();
        launch();
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_CUDA(cudaStreamSynchronize(stream));
        double t = now_s() - t0;
        nvshmem_barrier_all();
        return t;
    };
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const int REPS = 5;

    // Device thread latencies (8 B), microseconds per operation.
    {
        std::vector<double> put, get, fadd, add;
        for (int r = 0; r < REPS + 1; r++) {
            double a = time_pe0([&] { put_loop<<<1, 1>>>(big, src, 8, LAT_ITERS, peer); });
            double b = time_pe0([&] { get_loop<<<1, 1>>>(src, big, 8, LAT_ITERS, peer); });
            double c = time_pe0([&] { fadd_loop<<<1, 1>>>(word, LAT_ITERS, peer); });
            double d = time_pe0([&] { add_loop<<<1, 1>>>(word, LAT_ITERS, peer); });
            if (r > 0) {  // the first round warms up
                put.push_back(a * 1e6 / LAT_ITERS);
                get.push_back(b * 1e6 / LAT_ITERS);
                fadd.push_back(c * 1e6 / LAT_ITERS);
                add.push_back(d * 1e6 / LAT_ITERS);
            }
        }
        if (me == 0) {
            row("put_latency", "thread", 8, median(put), "us");
            row("get_latency", "thread", 8, median(get), "us");
            row("atomic_fetch_add_latency", "thread", 8, median(fadd), "us");
            row("atomic_add_latency", "thread", 8, median(add), "us");
        }
    }
    // Device barrier_all by one block on each PE: microseconds per barrier.
    {
        const int iters = 2000;
        std::vector<double> v;
        for (int r = 0; r < REPS + 1; r++) {
            double t = time_both([&] { barrier_loop<<<1, 64>>>(iters); });
            if (r > 0) v.push_back(t * 1e6 / iters);
        }
        if (me == 0) row("barrier_all_latency", "block", 8, median(v), "us");
    }
    // put_signal ping-pong at thread, warp and block scope: one-way microseconds.
    const char *scopes[] = {"thread", "warp", "block"};
    const int threads[] = {1, 32, 64};
    for (int s = 0; s < 3; s++) {
        std::vector<double> v;
        for (int r = 0; r < REPS + 1; r++) {
            double t = time_both([&] {
                pingpong<<<1, threads[s]>>>(big, src, 8, sig, LAT_ITERS, peer, s, me == 0);
            });
            if (r > 0) v.push_back(t * 1e6 / (2.0 * LAT_ITERS));
        }
        if (me == 0) row("put_signal_pingpong_latency", scopes[s], 8, median(v), "us");
    }
    // Stream-ordered ping-pong: queued by the host, one synchronization at the end.
    {
        const int iters = 2000;
        std::vector<double> v;
        for (int r = 0; r < REPS + 1; r++) {
            double t = time_both([&] {
                for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
                    if (me == 0) {
                        nvshmemx_putmem_signal_on_stream(big, src, 8, sig, i, NVSHMEM_SIGNAL_SET, peer, stream);
                        nvshmemx_signal_wait_until_on_stream(sig, NVSHMEM_CMP_GE, i, stream);
                    } else {
                        nvshmemx_signal_wait_until_on_stream(sig, NVSHMEM_CMP_GE, i, stream);
                        nvshmemx_putmem_signal_on_stream(big, src, 8, sig, i, NVSHMEM_SIGNAL_SET, peer, stream);
                    }
                }
            });
            if (r > 0) v.push_back(t * 1e6 / (2.0 * iters));
        }
        if (me == 0) row("put_signal_pingpong_latency", "stream", 8, median(v), "us");
    }
    // Host-initiated put of 8 B, then quiet.
    {
        const int iters = 2000;
        std::vector<double> v;
        for (int r = 0; r < REPS + 1; r++) {
            double t = time_pe0([&] {
                for (int i = 0; i < iters; i++) {
                    nvshmem_putmem(big, src, 8, peer);
                    nvshmem_quiet();
                }
            });
            if (r > 0) v.push_back(t * 1e6 / iters);
        }
        if (me == 0) row("put_latency", "host", 8, median(v), "us");
    }
    // Bandwidth over sizes: grid puts to the peer, and cudaMemcpy DtoD on this GPU.
    for (size_t size : SWEEP) {
        int iters = (int)std::max<size_t>(10, std::min<size_t>(10000, (256u << 20) / size));
        std::vector<double> bw, dtod;
        for (int r = 0; r < REPS + 1; r++) {
            double a = time_pe0([&] { put_bw<<<GRID_BLOCKS, GRID_THREADS>>>(big, src, size, iters, peer, size); });
            double b = time_pe0([&] {
                for (int i = 0; i < iters; i++) CHECK_CUDA(cudaMemcpyAsync(big, src, size, cudaMemcpyDeviceToDevice, 0));
            });
            if (r > 0) {
                bw.push_back((double)size * iters / a / 1e9);
                dtod.push_back((double)size * iters / b / 1e9);
            }
        }
        if (me == 0) {
            row("put_bw", "grid", size, median(bw), "GB/s");
            row("dtod_bw", "host", size, median(dtod), "GB/s");
        }
    }
    // The same through the 256 MiB window.
    char *wdst = (char *)nvshmem_malloc(ROTATION_WINDOW);
    char *wsrc = (char *)nvshmem_malloc(ROTATION_WINDOW);
    CHECK_CUDA(cudaMemset(wsrc, 0x5a, ROTATION_WINDOW));
    CHECK_CUDA(cudaDeviceSynchronize());
    for (size_t size : ROTATING_SWEEP) {
        int iters = (int)std::max<size_t>(10, std::min<size_t>(10000, (256u << 20) / size));
        size_t slots = ROTATION_WINDOW / size;
        std::vector<double> bw, dtod;
        for (int r = 0; r < REPS + 1; r++) {
            double a = time_pe0([&] { put_bw<<<GRID_BLOCKS, GRID_THREADS>>>(wdst, wsrc, size, iters, peer, ROTATION_WINDOW); });
            double b = time_pe0([&] {
                for (int i = 0; i < iters; i++) {
                    size_t at = (i % slots) * size;
                    CHECK_CUDA(cudaMemcpyAsync(wdst + at, wsrc + at, size, cudaMemcpyDeviceToDevice, 0));
                }
            });
            if (r > 0) {
                bw.push_back((double)size * iters / a / 1e9);
                dtod.push_back((double)size * iters / b / 1e9);
            }
        }
        if (me == 0) {
            row("put_bw_rotating", "grid", size, median(bw), "GB/s");
            row("dtod_bw_rotating", "host", size, median(dtod), "GB/s");
        }
    }
    nvshmem_free(wsrc);
    nvshmem_free(wdst);
    nvshmem_barrier_all();
    nvshmem_free(word);
    nvshmem_free(sig);
    nvshmem_free(src);
    nvshmem_free(big);
    nvshmem_finalize();
    return 0;
}
