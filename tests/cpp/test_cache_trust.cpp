/** \file Who may have written the kernel cache (runtime/jit/cache_trust.h): folders and entries that
 * others can write are refused, SEASTAR_CACHE_SHARED=1 lifts that, new files are private, and a
 * compile's private folder (runtime/jit/work_dir.h) stays the one the compiler works in. CI runs as
 * root, so another user is made with chown (uid 65534); those cases skip elsewhere. */
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "core/util/errors.h"
#include "runtime/jit/cache_trust.h"
#include "runtime/jit/kernel_cache.h"
#include "runtime/jit/subprocess.h"
#include "runtime/jit/work_dir.h"

namespace sk = seastar::runtime;

namespace {

constexpr uid_t kOther = 65534;

/// A fresh 0700 folder under /tmp (sticky: a trusted place), removed at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/seastar-trust-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path = d ? d : "/tmp";
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string dir(const std::string& name, mode_t mode) const {
    const std::string p = path + "/" + name;
    EXPECT_EQ(mkdir(p.c_str(), 0700), 0) << p;
    EXPECT_EQ(chmod(p.c_str(), mode), 0) << p;  // chmod: the umask does not apply
    return p;
  }
};

/// Sets an environment variable for one scope.
struct Env {
  std::string name;
  std::string old;
  bool had;
  Env(const char* n, const char* value) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (o) old = o;
    if (value) setenv(n, value, 1); else unsetenv(n);
  }
  ~Env() {
    if (had) setenv(name.c_str(), old.c_str(), 1); else unsetenv(name.c_str());
  }
};

/// The CompileError check_folder throws for `dir`, or "" when it accepts it.
std::string refusal(const std::string& dir) {
  try {
    sk::cache::check_folder(dir);
  } catch (const seastar::CompileError& e) {
    return e.what();
  }
  return "";
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(CacheTrust, FoldersOthersCanWriteAreRefused) {
  Env plain("SEASTAR_CACHE_SHARED", nullptr);
  TempDir t;
  EXPECT_EQ(refusal(t.path), "");  // /tmp above is sticky: fine
  const std::string open = t.dir("open", 0777);
  const std::string why = refusal(open);
  EXPECT_TRUE(contains(why, "the kernel cache folder " + open + " is writable by group and others")) << why;
  EXPECT_TRUE(contains(why, "mode 0777") && contains(why, "chmod go-w " + open)) << why;
  EXPECT_TRUE(contains(why, "SEASTAR_CACHE_DIR") && contains(why, "SEASTAR_CACHE_SHARED=1")) << why;
  EXPECT_TRUE(contains(refusal(t.dir("group", 0770)), "writable by group (")) << refusal(t.path + "/group");
  EXPECT_TRUE(contains(refusal(t.dir("sticky_itself", 01777)), "mode 1777"));  // the cache folder may not be
  EXPECT_EQ(refusal(t.dir("readable", 0755)), "");
  // a folder above that others can write: they could rename the cache folder and put theirs there
  const std::string inside = open + "/kernels";
  ASSERT_EQ(mkdir(inside.c_str(), 0700), 0);
  const std::string above = refusal(inside);
  EXPECT_TRUE(contains(above, inside + " is inside " + open + ", which is writable by group and others")) << above;
  EXPECT_TRUE(contains(above, "chmod go-w " + open + ")")) << above;
  // unless it is sticky, as /tmp is
  const std::string sticky = t.dir("sticky", 01777) + "/kernels";
  ASSERT_EQ(mkdir(sticky.c_str(), 0700), 0);
  EXPECT_EQ(refusal(sticky), "");
}

TEST(CacheTrust, FoldersOfAnotherUserAreRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  Env plain("SEASTAR_CACHE_SHARED", nullptr);
  TempDir t;
  const std::string theirs = t.dir("theirs", 0755);
  ASSERT_EQ(chown(theirs.c_str(), kOther, kOther), 0);
  const std::string why = refusal(theirs);
  EXPECT_TRUE(contains(why, theirs + " is owned by uid 65534") && contains(why, "neither you (uid 0")) << why;
  EXPECT_TRUE(contains(why, "mode 0755") && contains(why, "SEASTAR_CACHE_DIR")) << why;
  const std::string below = theirs + "/kernels";
  ASSERT_EQ(mkdir(below.c_str(), 0700), 0);
  EXPECT_TRUE(contains(refusal(below), below + " is inside " + theirs + ", which is owned by uid 65534"));
  // a sticky world-writable folder above is fine only when root's or the user's
  const std::string sticky = t.dir("sticky", 01777);
  const std::string in_sticky = sticky + "/kernels";
  ASSERT_EQ(mkdir(in_sticky.c_str(), 0700), 0);
  EXPECT_EQ(refusal(in_sticky), "");
  ASSERT_EQ(chown(sticky.c_str(), kOther, kOther), 0);
  EXPECT_TRUE(contains(refusal(in_sticky), "owned by uid 65534"));
}

TEST(CacheTrust, EntriesOthersCouldHaveWrittenAreBad) {
  Env plain("SEASTAR_CACHE_SHARED", nullptr);
  TempDir t;
  const std::string path = t.path + "/e-k1.so";
  sk::cache::write_entry(path, "k1", "object bytes", {});
  EXPECT_EQ(mode_of(path), 0600u);
  std::string why;
  sk::UniqueFd fd;
  ASSERT_EQ(sk::cache::read_entry(path, "k1", nullptr, &why, &fd), sk::cache::Found::hit) << why;
  EXPECT_TRUE(fd);  // the descriptor it was checked and read through, for the loader

  ASSERT_EQ(chmod(path.c_str(), 0664), 0);
  EXPECT_EQ(sk::cache::read_entry(path, "k1", nullptr, &why, &fd), sk::cache::Found::bad);
  EXPECT_TRUE(contains(why, "writable by group (owner uid") && contains(why, "mode 0664")) << why;
  EXPECT_FALSE(fd);
  ASSERT_EQ(chmod(path.c_str(), 0602), 0);
  EXPECT_EQ(sk::cache::read_entry(path, "k1", nullptr, &why), sk::cache::Found::bad);
  EXPECT_TRUE(contains(why, "writable by others")) << why;
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);

  // a symbolic link is not followed, whatever it points at
  const std::string link = t.path + "/link-k1.so";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  EXPECT_EQ(sk::cache::read_entry(link, "k1", nullptr, &why), sk::cache::Found::bad);
  EXPECT_TRUE(contains(why, "symbolic link")) << why;
  // a FIFO in an entry's place is bad at once (opening it must not wait for a writer)
  const std::string fifo = t.path + "/fifo-k1.so";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(sk::cache::read_entry(fifo, "k1", nullptr, &why), sk::cache::Found::bad);
  EXPECT_TRUE(contains(why, "not a regular file")) << why;
  EXPECT_TRUE(sk::cache::discard(fifo, "k1"));

  if (geteuid() == 0) {
    ASSERT_EQ(chown(path.c_str(), kOther, kOther), 0);
    EXPECT_EQ(sk::cache::read_entry(path, "k1", nullptr, &why), sk::cache::Found::bad);
    EXPECT_TRUE(contains(why, "owned by uid 65534") && contains(why, "not by you, uid 0")) << why;
    // rebuilt in place: the new entry is this user's and private
    sk::cache::write_entry(path, "k1", "object bytes", {});
    EXPECT_EQ(sk::cache::read_entry(path, "k1", nullptr, &why), sk::cache::Found::hit) << why;
  }
}

TEST(CacheTrust, TheSharedOptInLiftsTheChecks) {
  TempDir t;
  const std::string open = t.dir("open", 0777);
  const std::string path = open + "/e-k1.so";
  {
    Env shared("SEASTAR_CACHE_SHARED", "1");
    EXPECT_TRUE(sk::cache::shared());
    EXPECT_EQ(refusal(open), "");
    sk::cache::write_entry(path, "k1", "object bytes", {});
    EXPECT_EQ(mode_of(path), 0644u);  // shared: readable by the others
    EXPECT_EQ(sk::cache::entry_mode(true), 0755u);
    ASSERT_EQ(chmod(path.c_str(), 0666), 0);
    if (geteuid() == 0) ASSERT_EQ(chown(path.c_str(), kOther, kOther), 0);
    std::string why;
    EXPECT_EQ(sk::cache::read_entry(path, "k1", nullptr, &why), sk::cache::Found::hit) << why;
  }
  {
    Env off("SEASTAR_CACHE_SHARED", "0");
    EXPECT_FALSE(sk::cache::shared());
    EXPECT_NE(refusal(open), "");
    EXPECT_EQ(sk::cache::entry_mode(false), 0600u);
    EXPECT_EQ(sk::cache::folder_mode(), 0700u);
  }
  Env misspelt("SEASTAR_CACHE_SHARED", "yes");
  try {
    sk::cache::shared();
    ADD_FAILURE() << "SEASTAR_CACHE_SHARED=yes was accepted";
  } catch (const seastar::ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "SEASTAR_CACHE_SHARED='yes'")) << e.what();
  }
}

TEST(CacheTrust, EnsureDirMakesPrivateFoldersAndResolvesLinks) {
  Env plain("SEASTAR_CACHE_SHARED", nullptr);
  TempDir t;
  const mode_t old_mask = umask(0);  // the modes are explicit, not the umask's
  {
    Env dir("SEASTAR_CACHE_DIR", (t.path + "/a/b/kernels/").c_str());
    EXPECT_EQ(sk::cache::ensure_dir(), t.path + "/a/b/kernels");
  }
  umask(old_mask);
  EXPECT_EQ(mode_of(t.path + "/a"), 0700u);
  EXPECT_EQ(mode_of(t.path + "/a/b/kernels"), 0700u);
  // the folders checked are those a symbolic link leads to, and the path used is theirs
  ASSERT_EQ(symlink((t.path + "/a/b").c_str(), (t.path + "/link").c_str()), 0);
  {
    Env dir("SEASTAR_CACHE_DIR", (t.path + "/link/kernels").c_str());
    EXPECT_EQ(sk::cache::ensure_dir(), t.path + "/a/b/kernels");
  }
  ASSERT_EQ(chmod((t.path + "/a").c_str(), 0777), 0);
  Env dir("SEASTAR_CACHE_DIR", (t.path + "/link/kernels").c_str());
  try {
    sk::cache::ensure_dir();
    ADD_FAILURE() << "a cache below a folder others can write was accepted";
  } catch (const seastar::CompileError& e) {
    EXPECT_TRUE(contains(e.what(), "is inside " + t.path + "/a, which is writable")) << e.what();
  }
}

TEST(CacheTrust, AWorkDirIsPrivateAndStaysTheCompilersFolder) {
  Env plain("SEASTAR_CACHE_SHARED", nullptr);
  TempDir t;
  std::string path, moved = t.path + "/moved";
  {
    sk::cache::WorkDir work(t.path + "/e-k1.so");
    path = work.path();
    EXPECT_EQ(path.rfind(t.path + "/e-k1.so." + std::to_string(getpid()) + "-", 0), 0u) << path;
    EXPECT_GT(sk::cache::temp_owner(path.substr(t.path.size() + 1)), 0);  // swept if its process dies
    EXPECT_EQ(mode_of(path), 0700u);
    work.write("e.cpp", "the source written");
    EXPECT_EQ(mode_of(path + "/e.cpp"), 0600u);
    EXPECT_THROW(work.write("e.cpp", "again"), seastar::CompileError);  // O_EXCL
    // someone takes the folder's name: moves it away and puts theirs, with another source, in its place
    ASSERT_EQ(rename(path.c_str(), moved.c_str()), 0);
    ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
    std::ofstream(path + "/e.cpp") << "#error swapped";
    sk::ProcessResult r = sk::run_process({"cat", "e.cpp"}, work.fd());
    ASSERT_TRUE(r.ok()) << r.describe();
    EXPECT_EQ(r.output, "the source written");
    std::ofstream(moved + "/e.so") << "the compiler's output";
    sk::cache::install(work.fd(), "e.so", t.path + "/e-k1.so");
    std::ifstream in(t.path + "/e-k1.so");
    std::string installed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(installed, "the compiler's output");
  }
  // its files are gone; the folder now under its name is not its own, and is left alone
  struct stat st;
  EXPECT_NE(stat((moved + "/e.cpp").c_str(), &st), 0);
  EXPECT_EQ(stat((path + "/e.cpp").c_str(), &st), 0);
}
