// AtomicWriter (every output of sl-run and sl-opt) and the check that outputs are not inputs.
#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/atomic_file.h"
#include "slrt/distinct_paths.h"
#include "slrt/error.h"
#include "slrt/read_file.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

mode_t modeOf(const std::string &path) {
  struct stat info;
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

std::string baseName(const std::string &path) { return path.substr(path.rfind('/') + 1); }

// A pid that no process has now: a child that has exited and been reaped.
pid_t deadPid() {
  pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// The temporary's name with its pid replaced: ".<name>.sl-tmp.<host>-<pid>.<random>".
std::string withPid(const std::string &temporary, pid_t pid) {
  size_t dash = temporary.rfind('-'), dot = temporary.rfind('.');
  return temporary.substr(0, dash + 1) + std::to_string(pid) + temporary.substr(dot);
}

TEST(AtomicWriterTest, TemporaryIsUniqueRecognisableAndBesideTheTarget) {
  TempDir dir;
  std::string path = dir.file("out.bin");
  AtomicWriter a, b;
  ASSERT_TRUE(a.open(path)) << a.error();
  ASSERT_TRUE(b.open(path)) << b.error();
  EXPECT_NE(a.temporaryPath(), b.temporaryPath());
  EXPECT_THAT(a.temporaryPath(),
              MatchesRegex(dir.path() + "/\\.out\\.bin\\.sl-tmp\\.[0-9a-f]{8}-" +
                           std::to_string(::getpid()) + "\\.[0-9a-f]{16}"));
  ASSERT_TRUE(a.write("first") && a.commit()) << a.error();
  ASSERT_TRUE(b.write("second") && b.commit()) << b.error();
  EXPECT_EQ(readFile(path), "second");
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicWriterTest, DiscardedOrDestroyedWriterLeavesTheTargetAndNoTemporary) {
  TempDir dir;
  std::string path = dir.file("out.bin");
  writeBytes(path, "old");
  {
    AtomicWriter writer;
    ASSERT_TRUE(writer.open(path) && writer.write("new"));
  }
  AtomicWriter writer;
  ASSERT_TRUE(writer.open(path) && writer.write("new"));
  writer.discard();
  EXPECT_FALSE(writer.commit());
  EXPECT_EQ(readFile(path), "old");
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicWriterTest, ExistingTargetKeepsItsMode) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  for (mode_t mode : {0600, 0640, 0604}) {
    writeBytes(path, "old");
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    writeFileAtomically(path, "new");
    EXPECT_EQ(modeOf(path), mode);
    EXPECT_EQ(readFile(path), "new");
  }
}

TEST(AtomicWriterTest, NewTargetGetsTheModeAnOrdinaryCreateWould) {
  TempDir dir;
  mode_t mask = ::umask(027);
  writeFileAtomically(dir.file("a"), "x");
  ::umask(mask);
  EXPECT_EQ(modeOf(dir.file("a")), 0640u);
}

TEST(AtomicWriterTest, SymlinkAtAnOldFixedNameIsNeverTouched) {
  TempDir dir;
  std::string victim = dir.file("victim"), path = dir.file("out.bin");
  writeBytes(victim, "victim");
  for (const char *fixed : {"out.bin.tmp", "out.bin.tmp.XXXXXX"})
    ASSERT_EQ(::symlink(victim.c_str(), dir.file(fixed).c_str()), 0);
  writeFileAtomically(path, "new");
  EXPECT_EQ(readFile(victim), "victim");
  EXPECT_EQ(readFile(path), "new");
  EXPECT_EQ(listDir(dir.path()),
            (std::vector<std::string>{"out.bin", "out.bin.tmp", "out.bin.tmp.XXXXXX", "victim"}));
}

TEST(AtomicWriterTest, StaleTemporariesOfDeadProcessesAreRemovedAndNothingElse) {
  TempDir dir;
  std::string path = dir.file("ckpt"), victim = dir.file("victim");
  writeBytes(victim, "victim");
  std::string probe;
  {
    AtomicWriter writer;
    ASSERT_TRUE(writer.open(path));
    probe = baseName(writer.temporaryPath());
  }
  pid_t dead = deadPid();
  std::string stale = withPid(probe, dead);
  std::string alive = withPid(probe, ::getppid());
  std::string otherHost = "." + std::string("ckpt.sl-tmp.zzzzzzzz-") + std::to_string(dead) +
                          probe.substr(probe.rfind('.'));
  std::string otherTarget = "." + std::string("other.sl-tmp.") +
                            probe.substr(std::string(".ckpt.sl-tmp.").size());
  otherTarget = withPid(otherTarget, dead);
  for (const std::string &name : {stale, alive, otherHost, otherTarget})
    writeBytes(dir.file(name), "partial");
  // A symlink named like a dead process's temporary: neither removed nor followed.
  std::string link = withPid(probe, dead);
  link = link.substr(0, link.rfind('.')) + ".00000000000000aa";
  ASSERT_EQ(::symlink(victim.c_str(), dir.file(link).c_str()), 0);

  writeFileAtomically(path, "new");
  std::vector<std::string> want = {"ckpt", "victim", alive, otherHost, otherTarget, link};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listDir(dir.path()), want);
  EXPECT_EQ(readFile(victim), "victim");
}

// A process that was killed but is not reaped yet (a zombie: an MPI rank killed with SIGKILL whose
// launcher exited first) has ended: its temporary is stale.
TEST(AtomicWriterTest, TemporaryOfAZombieProcessIsStale) {
  TempDir dir;
  std::string path = dir.file("ckpt");
  std::string probe;
  {
    AtomicWriter writer;
    ASSERT_TRUE(writer.open(path));
    probe = baseName(writer.temporaryPath());
  }
  pid_t zombie = ::fork();
  if (zombie == 0)
    ::_exit(0);
  // Wait until it has exited, without reaping it.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  std::string stale = withPid(probe, zombie);
  writeBytes(dir.file(stale), "partial");
  writeFileAtomically(path, "new");
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"ckpt"});
  int status = 0;
  ::waitpid(zombie, &status, 0);
}

// In a child: the signal ends the process the way it would have without the writer, and the
// temporary is gone.
TEST(AtomicWriterTest, SignalsRemoveTheTemporaryThenDoWhatTheyDidBefore) {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    TempDir dir;
    std::string path = dir.file("out.bin");
    writeBytes(path, "old");
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::signal(signal, SIG_DFL);
      AtomicWriter writer;
      if (!writer.open(path) || !writer.write("partial"))
        ::_exit(3);
      ::raise(signal);
      ::_exit(4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal) << "signal " << signal;
    EXPECT_EQ(readFile(path), "old");
    EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"out.bin"}) << "signal " << signal;
  }
}

extern "C" void exitWith42(int) { ::_exit(42); }

TEST(AtomicWriterTest, AHandlerInstalledBeforeOrAfterIsChained) {
  for (bool before : {true, false}) {
    TempDir dir;
    std::string path = dir.file("out.bin");
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (before)
        std::signal(SIGTERM, exitWith42);
      {
        // A write before the handler is installed (as sl-run's communicator installs its SIGTERM
        // report at start-up, after no write, or a tool after an earlier write).
        AtomicWriter earlier;
        if (!earlier.open(path))
          ::_exit(3);
      }
      if (!before)
        std::signal(SIGTERM, exitWith42);
      AtomicWriter writer;
      if (!writer.open(path) || !writer.write("partial"))
        ::_exit(3);
      ::raise(SIGTERM);
      ::_exit(4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 42) << "before: " << before;
    EXPECT_TRUE(listDir(dir.path()).empty()) << "before: " << before;
  }
}

TEST(AtomicWriterTest, AnIgnoredSignalStaysIgnored) {
  TempDir dir;
  std::string path = dir.file("out.bin");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGINT, SIG_IGN);
    AtomicWriter writer;
    if (!writer.open(path) || !writer.write("done"))
      ::_exit(3);
    ::raise(SIGINT);
    ::_exit(writer.commit() ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(readFile(path), "done");
}

TEST(AtomicWriterTest, ErrorsSayWhatFailedWithoutThrowing) {
  TempDir dir;
  AtomicWriter writer;
  EXPECT_FALSE(writer.open(dir.path()));
  EXPECT_EQ(writer.error(), "cannot write (it is a directory)");
  EXPECT_FALSE(writer.open(dir.file("no/such/out")));
  EXPECT_EQ(writer.error(),
            "cannot create a temporary file to write it (No such file or directory)");
  EXPECT_EQ(writer.reason(), "No such file or directory");
  EXPECT_FALSE(writer.write("x"));
  EXPECT_THAT(errorOf([&] { checkWritable(dir.file("no/such/out")); }),
              AllOf(HasSubstr(dir.file("no/such/out")),
                    HasSubstr(": cannot write (No such file or directory)")));
  EXPECT_TRUE(listDir(dir.path()).empty());
}

TEST(AtomicWriterTest, RenameFailingRemovesTheTemporary) {
  TempDir dir;
  std::string path = dir.file("out");
  AtomicWriter writer;
  ASSERT_TRUE(writer.open(path) && writer.write("data"));
  // A directory appears at the target while the temporary is written: rename(2) fails.
  std::filesystem::create_directories(dir.file("out/inside"));
  EXPECT_FALSE(writer.commit());
  EXPECT_EQ(writer.error(), "cannot write (Is a directory)");
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"out"});
}

TEST(AtomicWriterTest, TargetThatIsNotARegularFileIsWrittenInPlace) {
  // As /dev/null is (sl-opt -o /dev/null): renaming over it would replace the device node. A FIFO
  // stands for it here, with a reader so that opening it for writing does not block.
  TempDir dir;
  std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  AtomicWriter writer;
  ASSERT_TRUE(writer.open(fifo)) << writer.error();
  EXPECT_EQ(writer.temporaryPath(), "");
  ASSERT_TRUE(writer.write("bytes") && writer.commit()) << writer.error();
  char got[8] = {};
  EXPECT_EQ(::read(reader, got, sizeof got), 5);
  ::close(reader);
  EXPECT_EQ(std::string(got), "bytes");
  struct stat info;
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"fifo"});
  EXPECT_EQ(sameFileConflict({}, {{"--report", fifo}, {"--trace", fifo}}), "");
}

// --- outputs that are inputs ----------------------------------------------------------------------

TEST(DistinctPathsTest, SameFileByPathLinkOrNameIsAConflict) {
  TempDir dir;
  std::string data = dir.file("tokens.bin");
  writeBytes(data, "tokens");
  ASSERT_EQ(::link(data.c_str(), dir.file("hard").c_str()), 0);
  ASSERT_EQ(::symlink(data.c_str(), dir.file("soft").c_str()), 0);
  std::filesystem::create_directory(dir.file("sub"));
  std::vector<NamedPath> inputs = {{"--data", data}};
  for (const std::string &output :
       {data, dir.file("hard"), dir.file("soft"), dir.file("sub/../tokens.bin")})
    EXPECT_EQ(sameFileConflict(inputs, {{"--report", output}}),
              "--report " + output + " is the same file as --data " + data +
                  " (an input of this run): writing it would destroy the input; write the output "
                  "elsewhere");
  EXPECT_EQ(sameFileConflict(inputs, {{"--report", dir.file("report.json")}}), "");
}

TEST(DistinctPathsTest, TwoOutputsThatDoNotExistYetConflictByRealPath) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("real"));
  ASSERT_EQ(::symlink(dir.file("real").c_str(), dir.file("alias").c_str()), 0);
  std::string a = dir.file("real/x"), b = dir.file("alias/x");
  EXPECT_EQ(sameFileConflict({}, {{"--save", a}, {"--report", b}, {"--trace", ""}}),
            "--report " + b + " is the same file as --save " + a +
                " (another output of this run): give each output its own file");
  EXPECT_EQ(sameFileConflict({}, {{"--save", a}, {"--report", dir.file("real/y")}}), "");
}

TEST(DistinctPathsTest, AnInputMayBeReplacedByTheOutputItNames) {
  TempDir dir;
  std::string ckpt = dir.file("c.safetensors");
  writeBytes(ckpt, "checkpoint");
  std::vector<NamedPath> inputs = {{"--resume", ckpt, "--save"}};
  EXPECT_EQ(sameFileConflict(inputs, {{"--save", ckpt}}), "");
  EXPECT_THAT(errorOf([&] { checkOutputsAreDistinct(inputs, {{"--report", ckpt}}); }),
              HasSubstr("--report " + ckpt + " is the same file as --resume " + ckpt));
}

} // namespace
} // namespace slrt::test
