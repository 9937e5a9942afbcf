// anywave SYCL shim: the few SYCL runtime calls Python needs, behind a C ABI (ctypes).
// Built on first use with the system C++ compiler against intel-sycl-rt's headers and
// libsycl (see anywave/runtime/sycl.py). It compiles SYCL source at run time with the
// kernel_compiler extension (sycl_ext_oneapi_kernel_compiler) and launches free-function
// nd_range kernels on USM device memory.
#define SYCL_DISABLE_FSYCL_SYCLHPP_WARNING 1
#include <sycl/sycl.hpp>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace syclex = sycl::ext::oneapi::experimental;
using exe_bundle = sycl::kernel_bundle<sycl::bundle_state::executable>;

static sycl::queue *g_q = nullptr;
static std::string g_name;
// errors of asynchronously enqueued launches, reported by the next aw_sycl_wait
static std::string g_async_err;
// the last command submitted to the in-order queue: while it runs, enqueued work is unfinished
// (on the heap and never destroyed, like g_q: no static destructor runs after libsycl's)
static sycl::event *g_last = nullptr;
// Python threads call the shim at once (ctypes drops the GIL): g_last and g_async_err are
// shared, and a sycl::event assignment racing another one frees its impl twice (CI crashed a
// worker in tests/test_threads_runtime.py). On the heap and never destroyed, like g_last.
static std::mutex *g_mu = new std::mutex;

static void set_last(const sycl::event &e) {
  std::lock_guard<std::mutex> hold(*g_mu);
  if (g_last) *g_last = e;
  else g_last = new sycl::event(e);
}

// the first asynchronous error, kept until taken
static void note_async_err(const char *what) {
  std::lock_guard<std::mutex> hold(*g_mu);
  if (g_async_err.empty()) g_async_err = what;
}

// the error noted so far (empty if none), cleared
static std::string take_async_err() {
  std::lock_guard<std::mutex> hold(*g_mu);
  std::string e;
  e.swap(g_async_err);
  return e;
}

static void on_async(sycl::exception_list errs) {
  for (auto &e : errs) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception &x) {
      note_async_err(x.what());
    }
  }
}

static void put(char *dst, int n, const std::string &s) {
  if (!dst || n <= 0) return;
  std::strncpy(dst, s.c_str(), (size_t)n - 1);
  dst[n - 1] = 0;
}

extern "C" {

// Select a device: ANYWAVE_SYCL_DEVICE substring if set, else an OpenCL-backend CPU device,
// else the default device. Returns 0 on success.
int aw_sycl_init(char *err, int n) {
  if (g_q) return 0;
  try {
    const char *want = std::getenv("ANYWAVE_SYCL_DEVICE");
    sycl::device pick;
    bool found = false;
    for (auto &d : sycl::device::get_devices()) {
      std::string name = d.get_info<sycl::info::device::name>();
      if (want && *want) {
        if (name.find(want) != std::string::npos) { pick = d; found = true; break; }
      } else if (d.is_cpu() && d.get_backend() == sycl::backend::opencl) {
        pick = d; found = true; break;
      }
    }
    if (!found) {
      if (want && *want) { put(err, n, std::string("no SYCL device matches ") + want); return 1; }
      pick = sycl::device(sycl::default_selector_v);
    }
    g_q = new sycl::queue(pick, on_async, sycl::property::queue::in_order());
    g_name = pick.get_info<sycl::info::device::name>();
    return 0;
  } catch (const std::exception &e) {
    put(err, n, e.what());
    return 2;
  }
}

const char *aw_sycl_device_name() { return g_name.c_str(); }

int aw_sycl_can_build() {
  try {
    return g_q && g_q->get_device().ext_oneapi_can_build(syclex::source_language::sycl) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

// Sub-group sizes the device supports, written to out (up to cap); returns the count.
int aw_sycl_sub_group_sizes(int *out, int cap) {
  if (!g_q) return 0;
  auto v = g_q->get_device().get_info<sycl::info::device::sub_group_sizes>();
  int k = 0;
  for (auto s : v) if (k < cap) out[k++] = (int)s;
  return k;
}

int aw_sycl_has_fp64() { return g_q && g_q->get_device().has(sycl::aspect::fp64) ? 1 : 0; }

size_t aw_sycl_local_mem() {
  return g_q ? g_q->get_device().get_info<sycl::info::device::local_mem_size>() : 0;
}

size_t aw_sycl_max_wg() {
  return g_q ? g_q->get_device().get_info<sycl::info::device::max_work_group_size>() : 0;
}

// Build SYCL source; opts is a '\n'-separated option list. Returns a bundle handle or null
// (then log holds the reason).
void *aw_sycl_build(const char *src, const char *opts, char *log, int n) {
  try {
    std::vector<std::string> o;
    std::string all(opts ? opts : "");
    size_t p = 0;
    while (p < all.size()) {
      size_t q = all.find('\n', p);
      if (q == std::string::npos) q = all.size();
      if (q > p) o.push_back(all.substr(p, q - p));
      p = q + 1;
    }
    auto src_kb = syclex::create_kernel_bundle_from_source(g_q->get_context(),
                                                           syclex::source_language::sycl, std::string(src));
    std::string blog;
    exe_bundle kb = syclex::build(src_kb, syclex::properties{syclex::build_options{o}, syclex::save_log{&blog}});
    put(log, n, blog);
    return new exe_bundle(kb);
  } catch (const std::exception &e) {
    put(log, n, e.what());
    return nullptr;
  }
}

void aw_sycl_free_bundle(void *kb) { delete static_cast<exe_bundle *>(kb); }

// Launch kernel `name` with nd_range (global, local) given x-fastest as (x, y, z).
// kinds[i]: 0 buffer (vals[i] host pointer, sizes[i] bytes, copied in and out), 1 u32, 2 u64,
// 3 USM pointer (vals[i], used in place). blocking = 0 with no kind-0 argument: only enqueue
// (errors then surface at aw_sycl_wait).
int aw_sycl_launch(void *kbp, const char *name, const size_t *g, const size_t *l, int nargs,
                   const int *kinds, void **vals, const size_t *sizes, char *err, int n, int blocking) {
  auto &kb = *static_cast<exe_bundle *>(kbp);
  std::vector<void *> dev(nargs, nullptr);
  bool copies = false;
  try {
    sycl::kernel k = kb.ext_oneapi_get_kernel(name);
    for (int i = 0; i < nargs; ++i) {
      if (kinds[i] == 0) {
        size_t bytes = sizes[i] ? sizes[i] : 16;
        dev[i] = sycl::malloc_device(bytes, *g_q);
        if (!dev[i]) throw std::runtime_error("malloc_device failed");
        if (sizes[i]) g_q->memcpy(dev[i], vals[i], sizes[i]);
        copies = true;
      } else if (kinds[i] == 3) {
        dev[i] = vals[i];
      }
    }
    sycl::event done = g_q->submit([&](sycl::handler &h) {
      for (int i = 0; i < nargs; ++i) {
        if (kinds[i] == 0 || kinds[i] == 3) h.set_arg(i, dev[i]);
        else if (kinds[i] == 1) h.set_arg(i, *static_cast<std::uint32_t *>(vals[i]));
        else h.set_arg(i, *static_cast<std::uint64_t *>(vals[i]));
      }
      h.parallel_for(sycl::nd_range<3>(sycl::range<3>(g[2], g[1], g[0]), sycl::range<3>(l[2], l[1], l[0])), k);
    });
    set_last(done);
    if (blocking || copies) {
      g_q->wait_and_throw();
      for (int i = 0; i < nargs; ++i)
        if (kinds[i] == 0 && sizes[i]) g_q->memcpy(vals[i], dev[i], sizes[i]);
      g_q->wait_and_throw();
      std::string late = take_async_err();
      if (!late.empty()) throw std::runtime_error(late);
    }
  } catch (const std::exception &e) {
    for (int i = 0; i < nargs; ++i) if (kinds[i] == 0 && dev[i]) sycl::free(dev[i], *g_q);
    take_async_err();
    put(err, n, e.what());
    return 1;
  }
  for (int i = 0; i < nargs; ++i) if (kinds[i] == 0 && dev[i]) sycl::free(dev[i], *g_q);
  return 0;
}

// USM shared allocation (host-accessible on the CPU device); null on failure.
void *aw_sycl_malloc(size_t bytes) {
  try {
    return g_q ? sycl::malloc_shared(bytes, *g_q) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

void aw_sycl_free(void *p) {
  if (g_q && p) sycl::free(p, *g_q);
}

// Wait for everything enqueued; returns 0, or 1 with the first asynchronous error in err.
int aw_sycl_wait(char *err, int n) {
  try {
    if (g_q) g_q->wait_and_throw();
  } catch (const std::exception &e) {
    note_async_err(e.what());
  }
  std::string late = take_async_err();
  if (!late.empty()) {
    put(err, n, late);
    return 1;
  }
  return 0;
}

// Copy n bytes after earlier work (USM or host pointers), then wait. Returns 0 or 1 (err).
int aw_sycl_memcpy(void *dst, const void *src, size_t bytes, char *err, int n) {
  try {
    set_last(g_q->memcpy(dst, src, bytes));
  } catch (const std::exception &e) {
    put(err, n, e.what());
    return 1;
  }
  return aw_sycl_wait(err, n);
}

// 1 while the last command submitted (so, on the in-order queue, any enqueued work) has not
// finished, else 0; never waits. Read by the exit hook (anywave/runtime/interrupt.py).
int aw_sycl_busy() {
  sycl::event last;
  {
    std::lock_guard<std::mutex> hold(*g_mu);
    if (!g_q || !g_last) return 0;
    last = *g_last;
  }
  try {
    return last.get_info<sycl::info::event::command_execution_status>() ==
                   sycl::info::event_command_status::complete ? 0 : 1;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
