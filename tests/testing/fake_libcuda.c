// A stand-in for NVIDIA's libcuda.so.1 where no GPU exists (CI): device
// memory is host memory, and of kernels it knows three by name: the ones of
// testing::AddAndStoreNullPtx — add_k0 runs on the host, and store_null_k0
// with a null address is a sticky fault: every later call of this process
// fails with CUDA_ERROR_ILLEGAL_ADDRESS (700), as the driver does after a
// kernel faults — and shared_size_k0, which stores the dynamic shared memory
// it was launched with to its int32 argument, or fails the launch with
// CUDA_ERROR_INVALID_VALUE (1) when that is more than its function allows
// (48 KiB unless cuFuncSetAttribute raised it), as the driver does. Loaded
// through LD_LIBRARY_PATH by the ctests server.gpu_fault_isolation and
// server.gpu_fake_dynamic_shared (tests/CMakeLists.txt), so the
// isolated-session fault path (CudaIsolationGpuTest) and the launcher's
// dynamic shared memory run on every CI machine; on a GPU the same tests run
// against the real driver. It covers only the calls the runtime makes
// (runtime/cuda/cuda_driver.h).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
static int sticky = 0;
// The opt-in shared memory limit a block has (attribute 97), as on an sm_86
// GPU: less than the 227 KiB a manifest may ask for, so the launcher's
// refusal runs here too.
enum { kSharedOptin = 101376, kSharedDefault = 48 << 10 };
// What shared_size_k0 may be launched with (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_
// SHARED_SIZE_BYTES); a module load starts it afresh.
static int shared_size_max = kSharedDefault;
#define STICKY()            \
  do {                      \
    if (sticky) return 700; \
  } while (0)

CUresult cuInit(unsigned f) {
  (void)f;
  return 0;
}
CUresult cuDriverGetVersion(int* v) {
  *v = 12040;
  return 0;
}
CUresult cuGetErrorName(CUresult e, const char** s) {
  *s = e == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
       : e == 1 ? "CUDA_ERROR_INVALID_VALUE"
                : "CUDA_ERROR_UNKNOWN";
  return 0;
}
CUresult cuGetErrorString(CUresult e, const char** s) {
  *s = e == 700 ? "an illegal memory access was encountered"
       : e == 1 ? "invalid argument"
                : "unknown error";
  return 0;
}
CUresult cuDeviceGet(int* d, int o) {
  *d = o;
  return o == 0 ? 0 : 101;
}
CUresult cuDeviceGetCount(int* c) {
  *c = 1;
  return 0;
}
CUresult cuDeviceGetName(char* n, int len, int d) {
  (void)d;
  snprintf(n, len, "Fake H200");
  return 0;
}
CUresult cuDeviceGetAttribute(int* v, int a, int d) {
  (void)d;
  switch (a) {
    case 75:
      *v = 9;
      break;
    case 76:
      *v = 0;
      break;
    case 16:
      *v = 132;
      break;
    case 10:
      *v = 32;
      break;
    case 1:
      *v = 1024;
      break;
    case 97:
      *v = kSharedOptin;
      break;
    case 13:  // clock rate (kHz), an H200's
      *v = 1980000;
      break;
    case 33:  // PCI bus: the card is 0000:3b:00.0 (fake_libnvidia_ml.c knows it)
      *v = 0x3b;
      break;
    case 34:  // PCI device
    case 50:  // PCI domain
      *v = 0;
      break;
    default:
      *v = 65536;
  }
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t* b, int d) {
  (void)d;
  *b = (size_t)1 << 37;
  return 0;
}
static int ctx_storage;
CUresult cuDevicePrimaryCtxRetain(void** c, int d) {
  (void)d;
  *c = &ctx_storage;
  return 0;
}
CUresult cuDevicePrimaryCtxRelease(int d) {
  (void)d;
  return 0;
}
CUresult cuCtxDestroy_v2(void* c) {
  (void)c;
  return 0;
}
CUresult cuCtxSetCurrent(void* c) {
  (void)c;
  return 0;
}
CUresult cuCtxSynchronize(void) {
  STICKY();
  return 0;
}
CUresult cuMemAlloc_v2(uint64_t* p, size_t n) {
  STICKY();
  *p = (uint64_t)(uintptr_t)aligned_alloc(256, (n + 255) / 256 * 256);
  return 0;
}
CUresult cuMemFree_v2(uint64_t p) {
  // Freed even after a fault, as a real context's memory goes with it (and
  // so that a leak checker sees none).
  free((void*)(uintptr_t)p);
  STICKY();
  return 0;
}
CUresult cuMemGetInfo_v2(size_t* f, size_t* t) {
  STICKY();
  *f = (size_t)1 << 36;
  *t = (size_t)1 << 37;
  return 0;
}
CUresult cuMemcpyHtoD_v2(uint64_t d, const void* s, size_t n) {
  STICKY();
  memcpy((void*)(uintptr_t)d, s, n);
  return 0;
}
CUresult cuMemcpyDtoH_v2(void* d, uint64_t s, size_t n) {
  STICKY();
  memcpy(d, (void*)(uintptr_t)s, n);
  return 0;
}
CUresult cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) {
  STICKY();
  memcpy((void*)(uintptr_t)d, (void*)(uintptr_t)s, n);
  return 0;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void* s, size_t n, void* st) {
  (void)st;
  return cuMemcpyHtoD_v2(d, s, n);
}
CUresult cuMemcpyDtoHAsync_v2(void* d, uint64_t s, size_t n, void* st) {
  (void)st;
  return cuMemcpyDtoH_v2(d, s, n);
}
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void* st) {
  (void)st;
  return cuMemcpyDtoD_v2(d, s, n);
}
CUresult cuMemcpyPeer(uint64_t d, void* dc, uint64_t s, void* sc, size_t n) {
  (void)dc;
  (void)sc;
  return cuMemcpyDtoD_v2(d, s, n);
}
CUresult cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) {
  STICKY();
  memset((void*)(uintptr_t)d, v, n);
  return 0;
}
static int stream_storage, event_storage;
CUresult cuStreamCreate(void** s, unsigned f) {
  (void)f;
  STICKY();
  *s = &stream_storage;
  return 0;
}
CUresult cuStreamDestroy_v2(void* s) {
  (void)s;
  STICKY();
  return 0;
}
CUresult cuStreamSynchronize(void* s) {
  (void)s;
  STICKY();
  return 0;
}
CUresult cuEventCreate(void** e, unsigned f) {
  (void)f;
  STICKY();
  *e = &event_storage;
  return 0;
}
CUresult cuEventRecord(void* e, void* s) {
  (void)e;
  (void)s;
  STICKY();
  return 0;
}
CUresult cuEventSynchronize(void* e) {
  (void)e;
  STICKY();
  return 0;
}
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  (void)a;
  (void)b;
  STICKY();
  *ms = 0.001f;
  return 0;
}
CUresult cuEventDestroy_v2(void* e) {
  (void)e;
  STICKY();
  return 0;
}
static int module_storage;
CUresult cuModuleLoadDataEx(void** m, const void* img, unsigned n, void* o, void** v) {
  (void)img;
  (void)n;
  (void)o;
  (void)v;
  STICKY();
  *m = &module_storage;
  shared_size_max = kSharedDefault;
  return 0;
}
CUresult cuModuleUnload(void* m) {
  (void)m;
  STICKY();
  return 0;
}
CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
  (void)m;
  STICKY();
  // The function handle is its name, one of these (nothing to free).
  static const char* const kKnown[] = {"add_k0", "store_null_k0", "shared_size_k0"};
  *f = (void*)"other";
  for (size_t i = 0; i < sizeof(kKnown) / sizeof(kKnown[0]); ++i) {
    if (strcmp(name, kKnown[i]) == 0) *f = (void*)kKnown[i];
  }
  return 0;
}
CUresult cuFuncSetAttribute(void* f, int a, int v) {
  STICKY();
  if (a != 8) return 1;  // only CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  if (v < 0 || v > kSharedOptin) return 1;
  if (strcmp((const char*)f, "shared_size_k0") == 0) shared_size_max = v;
  return 0;
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned sh, void* st, void** params, void** extra) {
  (void)gx;
  (void)gy;
  (void)gz;
  (void)bx;
  (void)by;
  (void)bz;
  (void)st;
  (void)extra;
  STICKY();
  const char* name = (const char*)f;
  if (strcmp(name, "add_k0") == 0) {
    float* a = (float*)(uintptr_t) * (int64_t*)params[0];
    float* b = (float*)(uintptr_t) * (int64_t*)params[1];
    float* c = (float*)(uintptr_t) * (int64_t*)params[2];
    int64_t n = *(int64_t*)params[3];
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  } else if (strcmp(name, "store_null_k0") == 0) {
    if (*(int64_t*)params[1] == 0) sticky = 1;  // reported by the next call, as launches are async
  } else if (strcmp(name, "shared_size_k0") == 0) {
    if (sh > (unsigned)shared_size_max) return 1;
    *(int32_t*)(uintptr_t) * (int64_t*)params[0] = (int32_t)sh;
  }
  return 0;
}
