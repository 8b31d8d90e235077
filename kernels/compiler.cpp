/** \file Host-compiler JIT with a self-verifying on-disk cache; see compiler.h. */
#include "kernels/compiler.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>

#include "codegen/launch_layout.h"
#include "core/util/file_names.h"
#include "core/util/errors.h"
#include "core/util/log.h"
#include "kernels/host_toolchain.h"
#include "kernels/subprocess.h"
#include "kernels/worker_pool.h"

namespace seastar::kernels {
namespace {

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

/// dlopen + the two symbols; false with `why` when the object is not the one for `key`.
bool load(const std::string& so, const std::string& key, bool must_be_fresh, CompiledKernel* k, std::string* why) {
  std::string path = so;
  std::string alias;
  if (must_be_fresh) {
    // the loader reuses an object already loaded under the same name: one that proved wrong
    // earlier and could not be unloaded is bypassed through a second name for the new file
    if (void* stale = dlopen(so.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(stale);
      alias = cache::temp_path(so) + ".so";
      if (::link(so.c_str(), alias.c_str()) == 0) path = alias;
    }
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!alias.empty()) ::unlink(alias.c_str());
  if (!handle) {
    const char* e = dlerror();
    *why = std::string("dlopen failed: ") + (e ? e : "unknown error");
    return false;
  }
  const char* built_for = static_cast<const char*>(dlsym(handle, cache::kKeySymbol));
  EntryFn entry = reinterpret_cast<EntryFn>(dlsym(handle, launch::kEntrySymbol));
  if (!built_for || key != built_for || !entry) {
    *why = !built_for ? std::string("its code exports no ") + cache::kKeySymbol
                      : key != built_for ? "its code was built for key " + std::string(built_for)
                                         : std::string("its code has no ") + launch::kEntrySymbol;
    dlclose(handle);
    return false;
  }
  // the kernels' threads: a kernel without the hook (the CUDA emulation) needs none
  using BindFn = void (*)(const void*);
  if (auto bind = reinterpret_cast<BindFn>(dlsym(handle, launch::kBindRuntimeSymbol))) bind(kernel_runtime());
  k->entry = entry;
  k->path = so;
  return true;
}

/// Compiles `source` into the entry for `n.key`; throws CompileError / Interrupted.
void build(const std::string& source, const std::string& name, const Names& n, const HostToolchain& tc) {
  // the key travels inside the code, so a loaded object proves which source it came from
  cache::write_file(n.src(), source + "\n// the cache key this object was built for (checked after dlopen)\n"
                                      "extern \"C\" __attribute__((visibility(\"default\"))) const char " +
                                      cache::kKeySymbol + "[] = \"" + n.key + "\";\n");
  const std::string tmp = cache::temp_path(n.so());
  cache::TempFile guard(tmp);
  std::vector<std::string> argv = tc.command;
  argv.insert(argv.end(), tc.flags.begin(), tc.flags.end());
  argv.insert(argv.end(), {"-o", tmp, n.src()});
  log::info("compiling " + n.src());
  ProcessResult r = run_process(argv);
  if (r.signal == SIGINT || r.signal == SIGTERM || r.signal == SIGHUP) {
    check_interrupt();  // Python: raises the pending KeyboardInterrupt itself
    SEASTAR_THROW(Interrupted, "compiling the kernels of '", name, "' was interrupted (", r.describe(),
                  "); nothing was cached");
  }
  if (!r.ok())
    SEASTAR_THROW(CompileError, "compiling the kernels of '", name, "' failed: ", r.describe(), " (source: ", n.src(),
                  ")\n", format_command(argv), "\n", r.output);
  cache::seal_and_install(tmp, n.so(), n.key,
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
  const cache::Found found = cache::read_entry(n.so(), n.key, nullptr, &why);
  if (found == cache::Found::hit && load(n.so(), n.key, false, &k, &why)) {
    k.cache_hit = true;
    update_index(n, tc);
    return k;
  }
  const bool was_bad = found != cache::Found::missing;
  if (was_bad) log::warn("kernel cache entry " + n.so() + " is unusable (" + why + "): rebuilding it");
  try {
    build(source, name, n, tc);
  } catch (...) {
    if (was_bad) cache::discard(n.so(), n.key);  // never leave a bad entry behind
    throw;
  }
  if (cache::read_entry(n.so(), n.key, nullptr, &why) != cache::Found::hit || !load(n.so(), n.key, was_bad, &k, &why)) {
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
  const cache::Found found = cache::read_entry(n.so(), n.key, &entry, &why);
  if (found == cache::Found::missing) fail("are (the index names " + n.so() + ", which is gone)");
  if (found == cache::Found::bad || entry.fields["lookup"] != n.lookup) {
    if (found == cache::Found::hit) why = "it was built for another source or flags";
    cache::discard(n.so(), n.key);
    fail("are usable (" + n.so() + ": " + why + "; removed)");
  }
  CompiledKernel k;
  if (!load(n.so(), n.key, false, &k, &why)) {
    cache::discard(n.so(), n.key);
    fail("are usable (" + n.so() + ": " + why + "; removed)");
  }
  log::info("host compiler unavailable; loaded " + n.so() + " (built by " + entry.fields["compiler"] + ")");
  k.cache_hit = true;
  return k;
}

}  // namespace

CompiledKernel compile_cpu(const std::string& source, const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, CompiledKernel> loaded;  // in-process cache by key
  std::lock_guard<std::mutex> lock(mutex);

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
    return k;
  }
  const std::string dir = cache::ensure_dir();
  n.stem = dir + "/" + util::file_stem(name);  // the key follows: two names of one stem never collide
  CompiledKernel k = tc.runnable ? load_or_build(source, name, n, tc) : load_indexed(name, n, tc, dir);
  loaded[memo] = k;
  return k;
}

}  // namespace seastar::kernels
