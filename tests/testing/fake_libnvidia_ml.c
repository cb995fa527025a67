// A stand-in for NVIDIA's libnvidia-ml.so.1 where no GPU exists (CI), beside
// fake_libcuda.c: it knows one card, at PCI address 0000:3b:00.0 (the one the
// fake driver reports), with fixed readings that the test checks
// (DeviceStateGpuTest in tests/gpu/device_state_gpu_test.cc, run against the
// stand-ins by the ctest server.gpu_fake_nvml). On a GPU the same test runs
// against the real NVML. It covers only the calls server/nvml.cc makes.
#include <string.h>
#include <strings.h>

typedef int nvmlReturn_t;
typedef void* nvmlDevice_t;
enum { kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotFound = 6 };
static int initialised = 0;
static int card;  // the one device handle's target

nvmlReturn_t nvmlInit_v2(void) {
  initialised = 1;
  return kSuccess;
}
nvmlReturn_t nvmlShutdown(void) {
  initialised = 0;
  return kSuccess;
}
const char* nvmlErrorString(nvmlReturn_t r) { return r == kNotFound ? "Not Found" : "Error"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!initialised) return kUninitialized;
  strncpy(version, "550.54.15", length);
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvmlDevice_t* device) {
  if (!initialised) return kUninitialized;
  // NVML takes either case and a 4- or 8-digit domain.
  if (strcasecmp(bus_id, "0000:3b:00.0") != 0 && strcasecmp(bus_id, "00000000:3b:00.0") != 0) {
    return kNotFound;
  }
  *device = &card;
  return kSuccess;
}
static int Known(nvmlDevice_t device) { return initialised && device == &card; }
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp) {
  if (!Known(device) || sensor != 0) return kInvalidArgument;
  *temp = 47;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int* mhz) {
  if (!Known(device)) return kInvalidArgument;
  if (type == 1) {
    *mhz = 1980;  // SM
  } else if (type == 2) {
    *mhz = 2619;  // memory
  } else {
    return kInvalidArgument;
  }
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  if (!Known(device)) return kInvalidArgument;
  *milliwatts = 123456;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int* pstate) {
  if (!Known(device)) return kInvalidArgument;
  *pstate = 0;
  return kSuccess;
}
// Only the old name, as a driver before CUDA 12.2 exports it.
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* reasons) {
  if (!Known(device)) return kInvalidArgument;
  *reasons = 0x1ULL | 0x4ULL | (1ULL << 40);  // idle, sw_power_cap, a bit NVML adds later
  return kSuccess;
}
