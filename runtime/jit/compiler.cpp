/** \file Host-compiler JIT with a self-verifying on-disk cache; see compiler.h. */
#include "runtime/jit/compiler.h"

#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "codegen/launch_layout.h"
#include "core/util/file_names.h"
#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/jit/build_lock.h"
#include "runtime/jit/dlopen_fd.h"
#include "runtime/jit/host_toolchain.h"
#include "runtime/jit/loaded_bindings.h"
#include "runtime/jit/subprocess.h"
#include "runtime/jit/work_dir.h"
#include "runtime/cpu/worker_pool.h"

namespace seastar::runtime {
namespace {

JitStats g_stats;  // guarded by compile_cpu's mutex
std::vector<std::pair<std::string, const void*>> g_bindings;  // guarded by compile_cpu's mutex

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += w + "\n";
  return s;
}

/// What one compile_cpu call works with: the key and the cache's file names.
struct Names {
  std::string lookup;  ///< source, flags, CPU: known without the compiler
  std::string key;     ///< lookup + compiler command, version and resolved target
  std::string stem;    ///< <cache dir>/<sanitised name>
  std::string so() const { return stem + "-" + key + ".so"; }
  std::string src() const { return stem + "-" + key + ".cpp"; }
  std::string index() const { return stem + "-" + lookup + ".index"; }
};

/// The last part of a path.
std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

/// Reads the entry at `so` for `key` and loads that very file (the descriptor it was checked and
/// read through, dlopen_fd.h). Found::hit only when it loaded and exports `key` and the entry
/// point; otherwise `why` says what is wrong.
cache::Found load(const std::string& so, const std::string& key, CompiledKernel* k, std::string* why) {
  UniqueFd fd;
  const cache::Found found = cache::read_entry(so, key, nullptr, why, &fd);
  if (found != cache::Found::hit) return found;
  // each load has a name of its own (dlopen_fd.h): an object that proved wrong earlier and
  // could not be unloaded is never handed back for a rebuilt file
  void* handle = dlopen_fd(fd.get(), so, RTLD_NOW | RTLD_LOCAL, why);
  if (!handle) return cache::Found::bad;
  const char* built_for = static_cast<const char*>(dlsym(handle, cache::kKeySymbol));
  EntryFn entry_fn = reinterpret_cast<EntryFn>(dlsym(handle, launch::kEntrySymbol));
  if (!built_for || key != built_for || !entry_fn) {
    *why = !built_for ? std::string("its code exports no ") + cache::kKeySymbol
                      : key != built_for ? "its code was built for key " + std::string(built_for)
                                         : std::string("its code has no ") + launch::kEntrySymbol;
    dlclose(handle);
    return cache::Found::bad;
  }
  // the C++ kernels' threads (the worker pool), then the tables registered through
  // loaded_bindings.h (the CUDA emulator's); an object without a hook needs none
  using BindFn = void (*)(const void*);
  if (auto bind = reinterpret_cast<BindFn>(dlsym(handle, launch::kBindRuntimeSymbol))) bind(kernel_runtime());
  for (const auto& [symbol, table] : g_bindings)
    if (auto bind = reinterpret_cast<BindFn>(dlsym(handle, symbol.c_str()))) bind(table);
  k->entry = entry_fn;
  k->path = so;
  return cache::Found::hit;
}

/// Compiles `source` into the entry for `n.key`; throws CompileError / Interrupted.
void build(const std::string& source, const std::string& name, const Names& n, const HostToolchain& tc) {
  // written and compiled in a private folder, never in the cache folder itself: no one else
  // can change the source between its writing and the compiler's reading it (work_dir.h)
  cache::WorkDir work(n.so());
  const std::string src = base_name(n.src()), obj = base_name(n.so());
  // the key travels inside the code, so a loaded object proves which source it came from
  work.write(src, source + "\n// the cache key this object was built for (checked after dlopen)\n"
                           "extern \"C\" __attribute__((visibility(\"default\"))) const char " +
                           cache::kKeySymbol + "[] = \"" + n.key + "\";\n");
  std::vector<std::string> argv = tc.command;
  argv.insert(argv.end(), tc.flags.begin(), tc.flags.end());
  argv.insert(argv.end(), {"-o", obj, src});
  log::info("compiling " + n.src());
  const auto started = std::chrono::steady_clock::now();
  ProcessResult r = run_process(argv, work.fd());
  ++g_stats.compiled;
  g_stats.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // a copy to read beside the entry, which the compiler's messages name; nothing compiles it
  try {
    cache::install(work.fd(), src, n.src());
  } catch (const Error& e) {
    log::debug(std::string("the generated source is not kept: ") + e.what());
  }
  if (r.signal == SIGINT || r.signal == SIGTERM || r.signal == SIGHUP) {
    check_interrupt();  // Python: raises the pending KeyboardInterrupt itself
    SEASTAR_THROW(Interrupted, "compiling the kernels of '", name, "' was interrupted (", r.describe(),
                  "); nothing was cached");
  }
  if (!r.ok())
    SEASTAR_THROW(CompileError, "compiling the kernels of '", name, "' failed: ", r.describe(), " (source: ", n.src(),
                  ")\n", format_command(argv), "\n", r.output);
  cache::seal_and_install(work.fd(), obj, n.so(), n.key,
                          {{"lookup", n.lookup}, {"compiler", tc.version}, {"target", tc.target}, {"name", name}});
}

/// Points the index at `n.key`; best effort (a read-only cache still serves its entries).
void update_index(const Names& n, const HostToolchain& tc) {
  cache::Entry e;
  if (cache::read_entry(n.index(), n.lookup, &e, nullptr) == cache::Found::hit && e.object == n.key) return;
  try {
    cache::write_entry(n.index(), n.lookup, n.key, {{"compiler", tc.version}});
  } catch (const Error& err) {
    log::debug(std::string("kernel cache index not updated: ") + err.what());
  }
}

CompiledKernel load_or_build(const std::string& source, const std::string& name, const Names& n,
                             const HostToolchain& tc) {
  CompiledKernel k;
  std::string why;
  auto from_disk = [&] {
    k.cache_hit = true;
    ++g_stats.loaded_from_disk;
    update_index(n, tc);
    return k;
  };
  const cache::Found found = load(n.so(), n.key, &k, &why);
  if (found == cache::Found::hit) return from_disk();
  // another process needing the same new kernel compiles it once for both: wait for its entry
  // (looked for again whether or not this process waited: the other may have finished between
  // the first look and the lock)
  const BuildLock lock(n.so() + ".lock");
  if (found == cache::Found::missing && load(n.so(), n.key, &k, &why) == cache::Found::hit) return from_disk();
  const bool was_bad = found != cache::Found::missing;
  if (was_bad) log::warn("kernel cache entry " + n.so() + " is unusable (" + why + "): rebuilding it");
  try {
    build(source, name, n, tc);
  } catch (...) {
    if (was_bad) cache::discard(n.so(), n.key);  // never leave a bad entry behind
    throw;
  }
  if (load(n.so(), n.key, &k, &why) != cache::Found::hit) {
    cache::discard(n.so(), n.key);
    SEASTAR_THROW(CompileError, "the kernels of '", name, "' were compiled but cannot be loaded from ", n.so(), ": ",
                  why);
  }
  update_index(n, tc);
  return k;
}

/// No compiler: the entry the index names, or one CompileError that names the compiler.
CompiledKernel load_indexed(const std::string& name, Names n, const HostToolchain& tc, const std::string& dir) {
  auto fail = [&](const std::string& what) {
    SEASTAR_THROW(CompileError, tc.problem, "\nNo compiled kernels of '", name, "' for this source, flags and CPU ",
                  what, " in the kernel cache ", dir,
                  "; install the compiler or point SEASTAR_CXX at one (SEASTAR_CACHE_DIR selects the cache).");
  };
  cache::Entry index;
  std::string why;
  switch (cache::read_entry(n.index(), n.lookup, &index, &why)) {
    case cache::Found::missing: fail("are"); break;
    case cache::Found::bad:
      cache::discard(n.index(), n.lookup);
      fail("can be found (its index " + n.index() + " was unusable: " + why + ")");
      break;
    case cache::Found::hit: break;
  }
  n.key = index.object;
  cache::Entry entry;
  if (cache::read_entry(n.so(), n.key, &entry, &why) == cache::Found::hit && entry.fields["lookup"] != n.lookup) {
    cache::discard(n.so(), n.key);
    fail("are usable (" + n.so() + ": it was built for another source or flags; removed)");
  }
  CompiledKernel k;
  switch (load(n.so(), n.key, &k, &why)) {
    case cache::Found::missing: fail("are (the index names " + n.so() + ", which is gone)"); break;
    case cache::Found::bad:
      cache::discard(n.so(), n.key);
      fail("are usable (" + n.so() + ": " + why + "; removed)");
      break;
    case cache::Found::hit: break;
  }
  log::info("host compiler unavailable; loaded " + n.so() + " (built by " + entry.fields["compiler"] + ")");
  k.cache_hit = true;
  ++g_stats.loaded_from_disk;
  return k;
}

std::mutex& compile_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

void bind_loaded_objects(const char* symbol, const void* table) {
  std::lock_guard<std::mutex> lock(compile_mutex());
  g_bindings.emplace_back(symbol, table);
}

JitStats jit_stats() {
  std::lock_guard<std::mutex> lock(compile_mutex());
  return g_stats;
}

CompiledKernel compile_cpu(const std::string& source, const std::string& name) {
  static std::map<std::string, CompiledKernel> loaded;  // in-process cache by key
  std::lock_guard<std::mutex> lock(compile_mutex());

  const HostToolchain& tc = host_toolchain();
  Names n;
  const std::string lookup_text = "seastar-cpu-2\n" + source + "\nflags\n" + join(tc.flags) + "cpu\n" + tc.cpu;
  n.lookup = content_hash(lookup_text);
  if (tc.runnable)
    n.key = content_hash(lookup_text + "command\n" + join(tc.command) + "version\n" + tc.version + "\ntarget\n" +
                         tc.target);
  const std::string memo = tc.runnable ? n.key : "index:" + n.lookup;
  if (auto it = loaded.find(memo); it != loaded.end()) {
    CompiledKernel k = it->second;
    k.cache_hit = true;
    ++g_stats.reused;
    return k;
  }
  const std::string dir = cache::ensure_dir();
  n.stem = dir + "/" + util::file_stem(name);  // the key follows: two names of one stem never collide
  CompiledKernel k = tc.runnable ? load_or_build(source, name, n, tc) : load_indexed(name, n, tc, dir);
  loaded[memo] = k;
  return k;
}

}  // namespace seastar::runtime
