// X1, issue 26 items 1, 4 and 5: the broker acts on the object it decided
// on. Each test runs the real ccsb-run in the dispatch profile with a root
// launcher and with an unprivileged one (uid 65534 through setpriv) and
// checks on the host, after the run, what the command could not change:
//  * item 1: /proc/self/fd/N (and every other magic-link spelling, and paths
//    that go through one) raced by threads that dup2 a protected file onto
//    N: contents, inode and link count of the protected files unchanged;
//  * item 5: chmod, chown and xattr/ACL changes on write-denied objects and
//    `.git` directories, by name, through a symlink, through /proc/self/fd
//    and by descriptor: modes unchanged, `file-write*` violations;
//  * item 4: prlimit on PID 1 refused; the session still runs and reports.
#include "escape_support.hpp"

#include <sys/xattr.h>

using namespace escape;

namespace {

bool violation_in(const std::string& events, const std::string& action, const std::string& target) {
  for (const auto& e : read_events(events))
    if (violation_of(e) == std::make_pair(action, target)) return true;
  return false;
}

// A python3 program run inside the sandbox from the worktree; t(NAME, F)
// prints @@NAME=ok or @@NAME=<errno name>.
std::string py_in(const std::string& dir, const std::string& code) {
  return "cd " + dir + " && python3 - <<'PY'\nimport os, errno, ctypes, threading, resource\n"
         "libc = ctypes.CDLL(None, use_errno=True)\n"
         "def t(name, f):\n"
         "    try:\n"
         "        f(); print('@@%s=ok' % name)\n"
         "    except OSError as e:\n"
         "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)))\n"
         "def check(rc):\n"
         "    if rc < 0:\n"
         "        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))\n" +
         code + "\nPY";
}

struct protected_file {
  std::string rel, text;
  ino_t ino{0};
};

// The worktree of the object tests: a nested repository present at launch
// (sub/.git), an existing .env and deploy.key, an innocent file and dirs.
std::vector<protected_file> make_objects(const sandbox_fixture& fx) {
  run_host_ok({"/usr/bin/git", "init", "-q", fx.work + "/sub"});
  write_file(fx.work + "/.env", "SECRET=" + random_token() + "\n");
  write_file(fx.work + "/deploy.key", "KEY-" + random_token() + "\n");
  write_file(fx.work + "/innocent.txt", "innocent\n");
  make_dirs(fx.work + "/d");
  write_file(fx.work + "/d/config", "plain\n");
  std::vector<protected_file> v;
  for (const char* rel : {".env", "deploy.key", "sub/.git/config"}) {
    protected_file p{rel, read_file(fx.work + "/" + rel)};
    struct stat st {};
    REQUIRE(::stat((fx.work + "/" + rel).c_str(), &st) == 0);
    p.ino = st.st_ino;
    v.push_back(p);
  }
  settle(fx);
  return v;
}

void require_untouched(const sandbox_fixture& fx, const std::vector<protected_file>& files) {
  for (const auto& p : files) {
    INFO(p.rel);
    struct stat st {};
    REQUIRE(::stat((fx.work + "/" + p.rel).c_str(), &st) == 0);
    CHECK(read_file(fx.work + "/" + p.rel) == p.text);
    CHECK(st.st_ino == p.ino);
    CHECK(st.st_nlink == 1); // no second name (a hard link made through the race)
  }
}

mode_t mode_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

} // namespace

TEST_CASE("X1: open, link and truncate of /proc/self/fd/N raced by threads that dup2 a protected file onto N never "
          "reach it",
          "[X1][P5][P7][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto files = make_objects(fx);
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {}, py_in(fx.work, R"(
N = 200
inn = os.open('innocent.txt', os.O_RDONLY)
tries = {'open': 0, 'link': 0, 'trunc': 0}
done = {'open': 0, 'link': 0, 'trunc': 0}
refused = {'open': 0, 'link': 0, 'trunc': 0}
linked_protected = 0
seq = 0
for name in ('.env', 'deploy.key', 'sub/.git/config'):
    pfd = os.open(name, os.O_RDONLY)
    pino = os.fstat(pfd).st_ino
    stop = False
    def flip():
        while not stop:
            os.dup2(inn, N); os.dup2(pfd, N)
    ths = [threading.Thread(target=flip) for _ in range(2)]
    for th in ths: th.start()
    lock = threading.Lock()
    def attack(k):
        global linked_protected, seq
        for i in range(1000):
            for op in ('open', 'link', 'trunc'):
                tries[op] += 1
                try:
                    if op == 'open':
                        fd = os.open('/proc/self/fd/%d' % N, os.O_WRONLY)
                        os.write(fd, b'PWNED'); os.close(fd)
                    elif op == 'link':
                        with lock:
                            seq += 1; alias = 'alias%d' % seq
                        os.link('/proc/self/fd/%d' % N, alias, follow_symlinks=True)
                        if os.stat(alias).st_ino == pino: linked_protected += 1
                        else: os.unlink(alias)
                    else:
                        os.truncate('/proc/thread-self/fd/%d' % N, 9)
                    done[op] += 1
                except OSError as e:
                    if e.errno == errno.EACCES: refused[op] += 1
    ats = [threading.Thread(target=attack, args=(k,)) for k in range(2)]
    for th in ats: th.start()
    for th in ats: th.join()
    stop = True
    for th in ths: th.join()
    os.close(pfd)
for op in tries:
    print('@@tries_%s=%d' % (op, tries[op]))
    print('@@done_%s=%d' % (op, done[op]))
    print('@@refused_%s=%d' % (op, refused[op]))
print('@@linked_protected=%d' % linked_protected)
)")));
      ESCAPE_REQUIRE_RAN(r);
      require_untouched(fx, files);
      CHECK(r.get("linked_protected") == "0");
      for (const char* op : {"open", "link", "trunc"}) {
        INFO(op);
        // Both files were met: some calls reached the innocent one, some
        // were refused on the protected one.
        CHECK(std::stoi(r.get(std::string("done_") + op)) > 0);
        CHECK(std::stoi(r.get(std::string("refused_") + op)) > 0);
      }
      CHECK(violation_in(fx.events, "file-write*", fx.work + "/.env"));
      CHECK(violation_in(fx.events, "file-write*", fx.work + "/sub/.git/config"));
    }
  }
}

TEST_CASE("X1: every magic-link spelling, and a path through one, is decided and acted on as the object it names",
          "[X1][P5][P7][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto files = make_objects(fx);
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {}, py_in(fx.work, R"(
env = os.open('.env', os.O_RDONLY)
inn = os.open('innocent.txt', os.O_RDONLY)
git = os.open('sub/.git', os.O_RDONLY | os.O_DIRECTORY)
d = os.open('d', os.O_RDONLY | os.O_DIRECTORY)
pid = os.getpid(); tid = threading.get_native_id()
def w(p, flags=os.O_WRONLY):
    os.close(os.open(p, flags, 0o644))
t('self_fd', lambda: w('/proc/self/fd/%d' % env))
t('thread_self_fd', lambda: w('/proc/thread-self/fd/%d' % env))
t('pid_fd', lambda: w('/proc/%d/fd/%d' % (pid, env)))
t('task_fd', lambda: w('/proc/%d/task/%d/fd/%d' % (pid, tid, env)))
t('trunc_flag', lambda: w('/proc/self/fd/%d' % env, os.O_RDONLY | os.O_TRUNC))
t('innocent_fd', lambda: w('/proc/self/fd/%d' % inn))
t('through_fd', lambda: w('/proc/self/fd/%d/config' % git))
t('through_fd_hooks', lambda: w('/proc/self/fd/%d/hooks/pre-commit' % git, os.O_WRONLY | os.O_CREAT))
t('through_fd_ok', lambda: w('/proc/self/fd/%d/config' % d))
t('through_fd_new', lambda: w('/proc/self/fd/%d/new.txt' % d, os.O_WRONLY | os.O_CREAT))
t('through_fd_dotdot', lambda: w('/proc/self/fd/%d/../deploy.key' % d))
t('through_cwd', lambda: w('/proc/self/cwd/.env'))
t('through_cwd_new', lambda: w('/proc/self/cwd/cwd_new.txt', os.O_WRONLY | os.O_CREAT))
t('through_thread_cwd', lambda: w('/proc/thread-self/cwd/deploy.key'))
t('through_root', lambda: w('/proc/self/root' + os.getcwd() + '/.env'))
os.symlink('/proc/self/fd/%d' % env, 'lnk')
t('symlink_to_fd', lambda: w('lnk'))
t('truncate', lambda: os.truncate('/proc/self/fd/%d' % env, 0))
t('truncate_through', lambda: os.truncate('/proc/self/cwd/deploy.key', 0))
t('link_follow', lambda: os.link('/proc/self/fd/%d' % env, 'alias1', follow_symlinks=True))
t('link_nofollow', lambda: os.link('/proc/self/fd/%d' % env, 'alias2', follow_symlinks=False))
t('link_through', lambda: os.link('/proc/self/cwd/deploy.key', 'alias3'))
t('linkat_empty', lambda: check(libc.linkat(env, b'', -100, b'alias4', 0x1000)))
t('link_innocent', lambda: os.link('/proc/self/fd/%d' % inn, 'alias5', follow_symlinks=True))
t('unlink_through', lambda: os.unlink('/proc/self/cwd/.env'))
t('rename_through', lambda: os.rename('/proc/self/fd/%d/config' % git, 'stolen'))
t('mkdir_through_ok', lambda: os.mkdir('/proc/self/fd/%d/newdir' % d))
)")));
      ESCAPE_REQUIRE_RAN(r);
      for (const char* k : {"self_fd", "thread_self_fd", "pid_fd", "task_fd", "trunc_flag", "through_fd",
                            "through_fd_hooks", "through_fd_dotdot", "through_cwd", "through_thread_cwd",
                            "through_root", "symlink_to_fd", "truncate", "truncate_through", "link_follow",
                            "link_nofollow", "link_through", "unlink_through", "rename_through"}) {
        INFO(k);
        CHECK(r.get(k) == "EACCES");
      }
      for (const char* k : {"innocent_fd", "through_fd_ok", "through_fd_new", "through_cwd_new", "link_innocent",
                            "mkdir_through_ok"}) {
        INFO(k);
        CHECK(r.get(k) == "ok");
      }
      CHECK(r.get("linkat_empty") != "ok");
      require_untouched(fx, files);
      for (const char* p : {"/alias1", "/alias2", "/alias3", "/alias4", "/stolen", "/sub/.git/hooks/pre-commit"})
        CHECK_FALSE(file_exists(fx.work + p));
      CHECK(file_exists(fx.work + "/d/new.txt"));
      CHECK(file_exists(fx.work + "/cwd_new.txt"));
      CHECK(file_exists(fx.work + "/d/newdir"));
      CHECK(violation_in(fx.events, "file-write*", fx.work + "/.env"));
      CHECK(violation_in(fx.events, "file-write*", fx.work + "/deploy.key"));
      CHECK(violation_in(fx.events, "file-write*", fx.work + "/sub/.git/config"));
      CHECK(violation_in(fx.events, "file-write-create", fx.work + "/sub/.git/hooks/pre-commit"));
    }
  }
}

TEST_CASE("X1: chmod, chown, xattrs and ACLs of write-denied objects and .git directories are denied like writes",
          "[X1][P5][P7][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto files = make_objects(fx);
      const std::vector<std::string> guarded{".git", "sub/.git", "sub/.git/hooks", "sub/.git/config", ".env",
                                             "deploy.key"};
      std::map<std::string, mode_t> before;
      for (const auto& g : guarded) before[g] = mode_of(fx.work + "/" + g);
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {}, py_in(fx.work, R"(
import struct
def acl(perm_other):
    # version 2; USER_OBJ rwx, GROUP_OBJ r-x, OTHER perm_other
    return struct.pack('<I', 2) + struct.pack('<HHI', 1, 7, 0xffffffff) + struct.pack('<HHI', 4, 5, 0xffffffff) + \
        struct.pack('<HHI', 0x20, perm_other, 0xffffffff)
t('chmod_git', lambda: os.chmod('.git', 0o777))
t('chmod_sub_git', lambda: os.chmod('sub/.git', 0o777))
t('chmod_hooks', lambda: os.chmod('sub/.git/hooks', 0o777))
t('chmod_config', lambda: os.chmod('sub/.git/config', 0o666))
t('chmod_env', lambda: os.chmod('.env', 0o666))
t('chmod_key_dotdot', lambda: os.chmod('d/../deploy.key', 0o666))
os.symlink('.env', 'envlink'); os.symlink('sub/.git', 'gitlink')
t('chmod_via_symlink', lambda: os.chmod('envlink', 0o666))
t('chmod_via_dir_symlink', lambda: os.chmod('gitlink/hooks', 0o777))
efd = os.open('.env', os.O_RDONLY)
gfd = os.open('.git', os.O_RDONLY | os.O_DIRECTORY)
pfd = os.open('deploy.key', os.O_PATH)
t('chmod_proc_fd', lambda: os.chmod('/proc/self/fd/%d' % efd, 0o666))
t('chmod_proc_cwd', lambda: os.chmod('/proc/self/cwd/sub/.git/config', 0o666))
t('fchmod', lambda: os.fchmod(efd, 0o666))
t('fchmod_git', lambda: os.fchmod(gfd, 0o777))
t('fchmodat', lambda: check(libc.syscall(268, -100, b'deploy.key', 0o666)))
t('fchmodat_dirfd', lambda: check(libc.syscall(268, gfd, b'config', 0o666)))
t('fchmodat2_empty', lambda: check(libc.syscall(452, pfd, b'', 0o666, 0x1000)))
t('fchmodat2_nofollow', lambda: check(libc.syscall(452, -100, b'.env', 0o666, 0x100)))
t('chown', lambda: os.chown('.env', -1, os.getgid()))
t('lchown_git', lambda: os.lchown('.git', -1, os.getgid()))
t('fchown', lambda: os.fchown(efd, -1, os.getgid()))
t('fchownat_empty', lambda: check(libc.fchownat(pfd, b'', -1, os.getgid(), 0x1000)))
t('setxattr', lambda: os.setxattr('.env', 'user.x', b'1'))
t('setxattr_proc', lambda: os.setxattr('/proc/self/fd/%d' % efd, 'user.x', b'1'))
t('fsetxattr', lambda: os.setxattr(efd, 'user.x', b'1'))
t('removexattr', lambda: os.removexattr('deploy.key', 'user.x'))
t('acl_git', lambda: os.setxattr('sub/.git/hooks', 'system.posix_acl_access', acl(7)))
t('acl_default_git', lambda: os.setxattr('.git', 'system.posix_acl_default', acl(7)))
t('acl_dir', lambda: os.setxattr('d', 'system.posix_acl_access', acl(7)))
t('chmod_dir_777', lambda: os.chmod('d', 0o777))
# allowed twins
t('ok_chmod_file', lambda: os.chmod('innocent.txt', 0o600))
t('ok_chmod_file_777', lambda: os.chmod('d/config', 0o777))
t('ok_chmod_dir', lambda: os.chmod('d', 0o700))
t('ok_chmod_dir_sticky', lambda: os.chmod('d', 0o1777))
t('ok_chmod_git_objects', lambda: os.chmod('.git/objects', 0o755))
ifd = os.open('innocent.txt', os.O_RDONLY)
t('ok_fchmod', lambda: os.fchmod(ifd, 0o640))
t('ok_chmod_proc_fd', lambda: os.chmod('/proc/self/fd/%d' % ifd, 0o644))
os.mkdir('/tmp/h1dir')
t('ok_chmod_tmp', lambda: os.chmod('/tmp/h1dir', 0o777))
t('ok_chown', lambda: os.chown('innocent.txt', -1, os.getgid()))
t('ok_chmod_symlink_nofollow', lambda: check(libc.syscall(452, -100, b'envlink', 0o666, 0x100)))
)")));
      ESCAPE_REQUIRE_RAN(r);
      for (const char* k : {"chmod_git", "chmod_sub_git", "chmod_hooks", "chmod_config", "chmod_env",
                            "chmod_key_dotdot", "chmod_via_symlink", "chmod_via_dir_symlink", "chmod_proc_fd",
                            "chmod_proc_cwd", "fchmod", "fchmod_git", "fchmodat", "fchmodat_dirfd", "fchmodat2_empty",
                            "fchmodat2_nofollow", "chown", "lchown_git", "fchown", "fchownat_empty", "setxattr",
                            "setxattr_proc", "fsetxattr", "removexattr", "acl_git", "acl_default_git", "acl_dir",
                            "chmod_dir_777"}) {
        INFO(k);
        CHECK(r.get(k) == "EACCES");
      }
      for (const char* k : {"ok_chmod_file", "ok_chmod_file_777", "ok_chmod_dir", "ok_chmod_dir_sticky",
                            "ok_chmod_git_objects", "ok_fchmod", "ok_chmod_proc_fd", "ok_chmod_tmp", "ok_chown"}) {
        INFO(k);
        CHECK(r.get(k) == "ok");
      }
      // As the kernel: a symlink's own mode cannot be changed.
      CHECK(r.get("ok_chmod_symlink_nofollow") == "ENOTSUP");
      for (const auto& g : guarded) {
        INFO(g);
        CHECK(mode_of(fx.work + "/" + g) == before[g]);
        char buf[256];
        CHECK(::lgetxattr((fx.work + "/" + g).c_str(), "user.x", buf, sizeof buf) < 0);
        CHECK(::lgetxattr((fx.work + "/" + g).c_str(), "system.posix_acl_access", buf, sizeof buf) < 0);
      }
      CHECK(mode_of(fx.work + "/innocent.txt") == 0644);
      CHECK(mode_of(fx.work + "/d") == 01777);
      CHECK(mode_of(fx.work + "/d/config") == 0777);
      require_untouched(fx, files);
      for (const char* p : {"/.git", "/sub/.git/hooks", "/sub/.git/config", "/.env", "/deploy.key"}) {
        INFO(p);
        CHECK(violation_in(fx.events, "file-write*", fx.work + p));
      }
    }
  }
}

TEST_CASE("X1: prlimit on the supervisor (PID 1) is refused, and the session then runs a further command and reports its "
          "exit",
          "[X1][L1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {}, py_in(fx.work, R"(
import subprocess
t('cpu_pid1', lambda: resource.prlimit(1, resource.RLIMIT_CPU, (1, 1)))
t('nofile_pid1', lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (0, 0)))
t('own_pid', lambda: resource.prlimit(os.getpid(), resource.RLIMIT_CORE, (0, 0)))
t('own_zero', lambda: resource.prlimit(0, resource.RLIMIT_CORE, (0, 0)))
child = subprocess.Popen(['sleep', '30'])
t('child', lambda: resource.prlimit(child.pid, resource.RLIMIT_NOFILE, (64, 64)))
print('@@child_limit=%d' % resource.prlimit(child.pid, resource.RLIMIT_NOFILE)[0])
child.kill(); child.wait()
# Work for the broker: over a second of its CPU, which a 1 s RLIMIT_CPU on PID 1 would not survive.
for i in range(40000):
    os.close(os.open('w%d.txt' % (i % 50), os.O_CREAT | os.O_WRONLY, 0o644))
print('@@work=done')
)") + "\nsleep 1; echo after > after.txt; echo @@after=$?\nbash -c 'exit 3'; echo @@sub_exit=$?"));
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("cpu_pid1") == "EPERM");
      CHECK(r.get("nofile_pid1") == "EPERM");
      CHECK(r.get("own_pid") == "ok");
      CHECK(r.get("own_zero") == "ok");
      CHECK(r.get("child") == "ok");
      CHECK(r.get("child_limit") == "64");
      CHECK(r.get("work") == "done");
      CHECK(r.get("after") == "0");
      CHECK(r.get("sub_exit") == "3");
      CHECK(read_file(fx.work + "/after.txt") == "after\n");
      CHECK(violation_in(fx.events, "process-limit", "pid:1"));
    }
  }
}

// Every non-directory below `dir` that has a set-user-ID or set-group-ID bit.
std::vector<std::string> setid_files(const std::string& dir) {
  static std::vector<std::string>* out;
  std::vector<std::string> found;
  out = &found;
  ::nftw(dir.c_str(), [](const char* p, const struct stat* st, int, struct FTW*) {
    if (!S_ISDIR(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID))) out->push_back(p);
    return 0;
  }, 32, FTW_PHYS);
  return found;
}

TEST_CASE("X1 L8: no file the command creates or changes gains a set-user-ID or set-group-ID bit",
          "[X1][L8][L1][escape]") {
  // A root launcher presents a root-owned worktree to the session uid as its
  // owner (idmapped): a set-user-ID file made there would be root's on the
  // host, run as root by whoever starts it. Every way to set the bits:
  // chmod family, the mode of open/creat/mknod, O_TMPFILE then linkat; and
  // file capabilities, which the kernel refuses without CAP_SETFCAP.
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      write_file(fx.work + "/plain", "#!/bin/sh\necho hi\n", 0755);
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {}, py_in(fx.work, R"(
t('chmod_suid', lambda: os.chmod('plain', 0o4755))
t('chmod_sgid', lambda: os.chmod('plain', 0o2755))
fd = os.open('plain', os.O_RDONLY)
t('fchmod_suid', lambda: os.fchmod(fd, 0o4755))
t('fchmodat2_suid', lambda: check(libc.syscall(452, -100, b'plain', 0o4755, 0)))
t('chmod_proc_fd', lambda: os.chmod('/proc/self/fd/%d' % fd, 0o4755))
t('open_suid', lambda: os.close(os.open('made_suid', os.O_CREAT | os.O_WRONLY, 0o4755)))
t('open_sgid', lambda: os.close(os.open('made_sgid', os.O_CREAT | os.O_WRONLY, 0o2755)))
t('creat_suid', lambda: check(libc.creat(b'creat_suid', 0o4755)))
t('mknod_suid', lambda: os.mknod('nod_suid', 0o100000 | 0o4755))
def tmpfile_then_link():
    tf = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o755)
    os.fchmod(tf, 0o4755)
    os.link('/proc/self/fd/%d' % tf, 'linked_suid')
t('tmpfile_fchmod', tmpfile_then_link)
def tmpfile_mode():
    tf = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755)
    os.link('/proc/self/fd/%d' % tf, 'linked_mode')
t('tmpfile_mode', tmpfile_mode)
t('tmp_suid', lambda: os.close(os.open('/tmp/x', os.O_CREAT | os.O_WRONLY, 0o4755)))
# An existing name, opened with O_CREAT and a set-id mode: a FIFO's open
# waits in a helper that created a new file with that mode when the name
# was unlinked meanwhile (a race another thread wins); the mode of every
# O_CREAT is checked, and an existing name is never created by the act.
os.mkfifo('fifo')
t('fifo_creat_suid', lambda: os.close(os.open('fifo', os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK, 0o6755)))
t('existing_creat_suid', lambda: os.close(os.open('plain', os.O_WRONLY | os.O_CREAT, 0o4755)))
stop = []
def churn():
    while not stop:
        try:
            os.unlink('racy')
        except OSError:
            pass
        try:
            os.mkfifo('racy')
        except OSError:
            pass
th = threading.Thread(target=churn)
th.start()
won = 0
for i in range(400):
    try:
        fd2 = os.open('racy', os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK, 0o6755)
        if os.fstat(fd2).st_mode & 0o6000:
            won += 1
        os.close(fd2)
    except OSError:
        pass
stop.append(1)
th.join()
print('@@race_won=%d' % won)
import struct
t('file_caps', lambda: os.setxattr('plain', 'security.capability', struct.pack('<IIIII', 0x02000001, 0x80, 0, 0, 0)))
os.mkdir('sgdir')
t('dir_sgid', lambda: os.chmod('sgdir', 0o2775))
t('plain_mode', lambda: os.chmod('plain', 0o700))
)")));
      ESCAPE_REQUIRE_RAN(r);
      for (const char* k : {"chmod_suid", "chmod_sgid", "fchmod_suid", "fchmodat2_suid", "chmod_proc_fd", "open_suid",
                            "open_sgid", "creat_suid", "mknod_suid", "tmpfile_fchmod", "tmpfile_mode", "tmp_suid",
                            "file_caps", "fifo_creat_suid", "existing_creat_suid"}) {
        INFO(k);
        CHECK(r.get(k) == "EPERM");
      }
      CHECK(r.get("race_won") == "0");
      CHECK(r.get("dir_sgid") == "ok"); // a directory may: it runs nothing
      CHECK(r.get("plain_mode") == "ok");
      CHECK(setid_files(fx.work).empty());
      CHECK(::getxattr((fx.work + "/plain").c_str(), "security.capability", nullptr, 0) < 0);
      CHECK((mode_of(fx.work + "/plain") & 07777) == 0700);
      CHECK(violation_in(fx.events, "file-write*", fx.work + "/plain"));
      CHECK(violation_in(fx.events, "file-write*", fx.work + "/made_suid"));
    }
  }
}
