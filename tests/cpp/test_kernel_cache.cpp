/** \file The JIT's building blocks without a compiler: cache entries, file names, spawning. */
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/util/file_names.h"
#include "runtime/jit/kernel_cache.h"
#include "runtime/jit/subprocess.h"

namespace sk = seastar::runtime;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/seastar-cache-test-XXXXXX";
  const char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d ? d : "/tmp";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spill(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

}  // namespace

TEST(KernelCache, FileStemsAreSafeFileNames) {
  EXPECT_EQ(seastar::util::file_stem("gat_forward_f32_i32"), "gat_forward_f32_i32");
  EXPECT_EQ(seastar::util::file_stem("x;touch INJECTED;y"), "x_touch_INJECTED_y");
  EXPECT_EQ(seastar::util::file_stem("<lambda>"), "_lambda_");
  EXPECT_EQ(seastar::util::file_stem("$(rm -rf ~)"), "__rm_-rf___");
  EXPECT_EQ(seastar::util::file_stem(""), "k");
  EXPECT_EQ(seastar::util::file_stem("-rf"), "k-rf");
  EXPECT_EQ(seastar::util::file_stem("../up"), "k.._up");
  EXPECT_EQ(seastar::util::file_stem("\xc3\xa9t\xc3\xa9"), "__t__");  // UTF-8 bytes
  EXPECT_EQ(seastar::util::file_stem(std::string(300, 'n')).size(), 64u);
}

TEST(KernelCache, EntriesRoundTripAndCatchDamage) {
  const std::string dir = temp_dir(), path = dir + "/e-k1.so";
  std::string object(10000, '\0');
  for (size_t i = 0; i < object.size(); ++i) object[i] = static_cast<char>(i * 7);
  sk::cache::write_entry(path, "k1", object, {{"log", "line 1\nline 2 100%\r"}});

  sk::cache::Entry e;
  std::string why;
  ASSERT_EQ(sk::cache::read_entry(path, "k1", &e, &why), sk::cache::Found::hit) << why;
  EXPECT_EQ(e.object, object);
  EXPECT_EQ(e.fields["log"], "line 1\nline 2 100%\r");
  EXPECT_EQ(sk::cache::read_entry(path, "k2", &e, &why), sk::cache::Found::bad);
  EXPECT_NE(why.find("another key"), std::string::npos) << why;
  EXPECT_EQ(sk::cache::read_entry(dir + "/none", "k1", &e, &why), sk::cache::Found::missing);

  const std::string whole = slurp(path);
  spill(path, whole.substr(0, whole.size() / 2));
  EXPECT_EQ(sk::cache::read_entry(path, "k1", &e, &why), sk::cache::Found::bad);
  std::string garbled = whole;
  garbled[4096] ^= 1;
  spill(path, garbled);
  EXPECT_EQ(sk::cache::read_entry(path, "k1", &e, &why), sk::cache::Found::bad);
  EXPECT_NE(why.find("hash"), std::string::npos) << why;
  spill(path, "");
  EXPECT_EQ(sk::cache::read_entry(path, "k1", &e, &why), sk::cache::Found::bad);

  // a directory squatting the name is bad, and removed by discard
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  spill(path + "/inside", "x");
  EXPECT_EQ(sk::cache::read_entry(path, "k1", &e, &why), sk::cache::Found::bad);
  EXPECT_TRUE(sk::cache::discard(path, "k1"));
  EXPECT_EQ(sk::cache::read_entry(path, "k1", &e, &why), sk::cache::Found::missing);
  // a valid entry is never discarded
  sk::cache::write_entry(path, "k1", object, {});
  EXPECT_TRUE(sk::cache::discard(path, "k1"));
  EXPECT_EQ(sk::cache::read_entry(path, "k1", &e, &why), sk::cache::Found::hit);
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(KernelCache, TemporaryFilesOfDeadWritersAreSwept) {
  EXPECT_EQ(sk::cache::temp_owner("gat_fwd-0123abcd.so.4242-7.tmp"), 4242);
  EXPECT_EQ(sk::cache::temp_owner("gat_fwd-0123abcd.so.4242-7.tmp.so"), 4242);  // a suffix after .tmp
  EXPECT_EQ(sk::cache::temp_owner("gat_fwd-0123abcd.so.4242-7.tmp.x1Y2z3"), 4242);  // a WorkDir
  EXPECT_EQ(sk::cache::temp_owner("gat_fwd-0123abcd.so"), -1);
  EXPECT_EQ(sk::cache::temp_owner("x.tmp"), -1);
  EXPECT_EQ(sk::cache::temp_owner("x.12a-3.tmp"), -1);

  const std::string dir = temp_dir();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // now a pid that no process has
  auto file = [&](const std::string& name, int age_s) {
    const std::string path = dir + "/" + name;
    spill(path, "partial object");
    struct utimbuf t;
    t.actime = t.modtime = time(nullptr) - age_s;
    utime(path.c_str(), &t);
    return path;
  };
  auto exists = [](const std::string& p) { struct stat st; return stat(p.c_str(), &st) == 0; };
  const std::string dead = std::to_string(child), live = std::to_string(getppid());
  const std::string old_dead = file("a.so." + dead + "-0.tmp", 3600);
  const std::string old_dead_so = file("b.so." + dead + "-1.tmp.so", 3600);
  const std::string young_dead = file("c.so." + dead + "-2.tmp", 5);     // may still be renamed by a slow rename
  const std::string old_live = file("d.so." + live + "-0.tmp", 3600);    // its writer is still running
  const std::string ancient_live = file("e.so." + live + "-1.tmp", 200000);  // abandoned whoever wrote it
  const std::string entry = file("f.so", 200000);                        // an entry, never a temporary
  // a compile's private folder (runtime/jit/work_dir.h), with the files its compiler left
  const std::string work = dir + "/g.so." + dead + "-3.tmp.Ab12Cd";
  ASSERT_EQ(mkdir(work.c_str(), 0700), 0);
  file("g.so." + dead + "-3.tmp.Ab12Cd/g.cpp", 3600);
  struct utimbuf old_work;
  old_work.actime = old_work.modtime = time(nullptr) - 3600;
  utime(work.c_str(), &old_work);
  EXPECT_EQ(sk::cache::sweep_stale_temps(dir), 4);
  EXPECT_FALSE(exists(work));
  EXPECT_FALSE(exists(old_dead));
  EXPECT_FALSE(exists(old_dead_so));
  EXPECT_TRUE(exists(young_dead));
  EXPECT_TRUE(exists(old_live));
  EXPECT_FALSE(exists(ancient_live));
  EXPECT_TRUE(exists(entry));
}

TEST(Subprocess, ArgumentsAreWordsNotShellSyntax) {
  const std::string dir = temp_dir();
  const std::string arg = "a b;touch " + dir + "/INJECTED;$(touch " + dir + "/INJECTED2)'\"";
  sk::ProcessResult r = sk::run_process({"printf", "%s", arg});
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.output, arg);
  EXPECT_NE(access((dir + "/INJECTED").c_str(), F_OK), 0);
  EXPECT_NE(access((dir + "/INJECTED2").c_str(), F_OK), 0);
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Subprocess, CapturesBothStreamsAndTheStatus) {
  sk::ProcessResult r = sk::run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.output, "out\nerr\n");
  EXPECT_EQ(r.describe(), "exit status 3");

  r = sk::run_process({"sh", "-c", "kill -INT $$"});
  EXPECT_EQ(r.signal, 2);
  EXPECT_NE(r.describe().find("signal 2"), std::string::npos);

  r = sk::run_process({"/nonexistent/seastar-cxx", "--version"});
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.describe().find("/nonexistent/seastar-cxx"), std::string::npos) << r.describe();
}

TEST(Subprocess, AnInterruptCheckThatThrowsKillsTheChild) {
  sk::set_interrupt_check([] { throw std::runtime_error("stop"); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(sk::run_process({"sleep", "30"}), std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  sk::set_interrupt_check(nullptr);
}

TEST(Subprocess, CommandsSplitOnWhitespace) {
  EXPECT_EQ(sk::split_command("  ccache   g++\t-O2 "), (std::vector<std::string>{"ccache", "g++", "-O2"}));
  EXPECT_TRUE(sk::split_command("   ").empty());
  EXPECT_EQ(sk::format_command({"g++", "-o", "/a b/x.so", "it's"}), "g++ -o '/a b/x.so' 'it'\\''s'");
}
