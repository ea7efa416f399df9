// X1: the creation-rule broker, on the real kernel through the real ccsb-run
// in the default dispatch profile. Each test asserts what the command could
// NOT create (on the host, after the run) and that the allowed twin worked.
// Before X1 the dispatch profile was refused (exit 125, nothing ran), so
// every test here fails on that code at ESCAPE_REQUIRE_RAN.
#include "escape_support.hpp"

using namespace escape;

namespace {

proc_result dispatch(const sandbox_fixture& fx, const std::string& body) {
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  spawn_options o;
  o.argv = fx.ccsb_argv({}, sandbox_fixture::wrap(body), "dispatch");
  o.env = fx.env();
  o.cwd = fx.work;
  return run(o);
}

// A python3 program run inside the sandbox from the worktree.
std::string py(const std::string& code) { return "cd " + std::string("\"$W\"") + " && python3 - <<'PY'\n" + code + "\nPY"; }

// py() with the helpers the call tests share: t(NAME, F) prints @@NAME=ok
// or @@NAME=<errno name>; renameat2(A, B, FLAGS) raises OSError.
std::string py_calls(const std::string& code) {
  return py("import os, socket, errno, ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "def t(name, f):\n    try:\n        f(); print('@@%s=ok' % name)\n    except OSError as e:\n"
            "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)))\n"
            "def renameat2(a, b, flags):\n    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:\n"
            "        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))\n" +
            code);
}

std::string with_work(const sandbox_fixture& fx, const std::string& body) { return "W=" + fx.work + "\n" + body; }

} // namespace

TEST_CASE("X1: echo > a.pem fails with EACCES and a violation, echo > a.txt works", "[X1][P7][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, "cd " + fx.work + "\n( echo x > a.pem ) 2>/dev/null; echo @@pem=$?\n"
                        "echo y > a.txt; echo @@txt=$?\n( echo z > sub.env ) ; mkdir -p d/e && ( echo k > d/e/.env ) 2>/dev/null; echo @@env=$?");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("pem") != "0");
  CHECK(r.get("txt") == "0");
  CHECK(r.get("env") != "0");
  CHECK_FALSE(file_exists(fx.work + "/a.pem"));
  CHECK_FALSE(file_exists(fx.work + "/d/e/.env"));
  CHECK(read_file(fx.work + "/a.txt") == "y\n");
  CHECK(has_violation(fx, "file-write-create", fx.work + "/a.pem"));
  CHECK(has_violation(fx, "file-write-create", fx.work + "/d/e/.env"));
}

TEST_CASE("X1 S5: a broker violation event says which rule denied the call", "[X1][P7][P5][S5][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, "cd " + fx.work + "\n( echo x > a.pem ) 2>/dev/null; echo @@pem=$?\n"
                        "mkdir -p d && ( echo y > d/.env ) 2>/dev/null; echo @@env=$?");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("pem") != "0");
  CHECK(r.get("env") != "0");
  CHECK(violation_reason(fx, "file-write-create", fx.work + "/a.pem") == "P7: name matches *.pem");
  const std::string env = violation_reason(fx, "file-write-create", fx.work + "/d/.env");
  INFO(env);
  CHECK(env.rfind("P7: name matches ", 0) == 0);
  CHECK(env.find(".env") != std::string::npos);
}

TEST_CASE("X1: each brokered call with an allowed and a forbidden name", "[X1][P7][escape]") {
  sandbox_fixture fx;
  write_file(fx.work + "/old.pem", "OLD\n");
  write_file(fx.work + "/plain.txt", "PLAIN\n");
  hand_to_sandbox_uid(fx.base);
  auto r = dispatch(fx, with_work(fx, py_calls(R"(
t('open_ok', lambda: os.close(os.open('n.txt', os.O_CREAT | os.O_WRONLY, 0o644)))
t('open_bad', lambda: os.close(os.open('n.key', os.O_CREAT | os.O_WRONLY, 0o644)))
t('write_existing_bad', lambda: os.close(os.open('old.pem', os.O_WRONLY)))
t('trunc_existing_bad', lambda: os.close(os.open('old.pem', os.O_RDONLY | os.O_TRUNC)))
t('read_existing_ok', lambda: open('old.pem').read())
t('mkdir_ok', lambda: os.mkdir('dir1'))
t('mkdir_bad', lambda: os.mkdir('dir.pem'))
t('mkfifo_ok', lambda: os.mkfifo('fifo1'))
t('mkfifo_bad', lambda: os.mkfifo('fifo.pem'))
t('symlink_ok', lambda: os.symlink('plain.txt', 'ln1'))
t('symlink_bad', lambda: os.symlink('plain.txt', 'ln.pem'))
t('link_ok', lambda: os.link('plain.txt', 'hard.txt'))
t('link_bad', lambda: os.link('plain.txt', 'hard.key'))
t('link_from_bad', lambda: os.link('old.pem', 'alias.txt'))
t('rename_ok', lambda: os.rename('n.txt', 'm.txt'))
t('rename_bad', lambda: os.rename('m.txt', 'm.pem'))
t('rename_away_bad', lambda: os.rename('old.pem', 'old.txt'))
t('exchange_bad', lambda: renameat2('plain.txt', 'old.pem', 2))
t('truncate_ok', lambda: os.truncate('hard.txt', 1))
t('truncate_bad', lambda: os.truncate('old.pem', 0))
t('unlink_ok', lambda: os.unlink('ln1'))
t('unlink_bad', lambda: os.unlink('old.pem'))
t('rmdir_ok', lambda: os.rmdir('dir1'))
s = socket.socket(socket.AF_UNIX); t('bind_ok', lambda: s.bind('s1.sock'))
s2 = socket.socket(socket.AF_UNIX); t('bind_bad', lambda: s2.bind('s.pem'))
)")));
  ESCAPE_REQUIRE_RAN(r);
  for (const char* k : {"open_ok", "read_existing_ok", "mkdir_ok", "mkfifo_ok", "symlink_ok", "link_ok", "rename_ok",
                        "truncate_ok", "unlink_ok", "rmdir_ok", "bind_ok"}) {
    INFO(k);
    CHECK(r.get(k) == "ok");
  }
  for (const char* k : {"open_bad", "write_existing_bad", "trunc_existing_bad", "mkdir_bad", "mkfifo_bad", "symlink_bad",
                        "link_bad", "link_from_bad", "rename_bad", "rename_away_bad", "exchange_bad", "truncate_bad",
                        "unlink_bad", "bind_bad"}) {
    INFO(k);
    CHECK(r.get(k) == "EACCES");
  }
  CHECK(read_file(fx.work + "/old.pem") == "OLD\n");
  for (const char* p : {"/n.key", "/dir.pem", "/fifo.pem", "/ln.pem", "/hard.key", "/alias.txt", "/m.pem", "/old.txt", "/s.pem"})
    CHECK_FALSE(file_exists(fx.work + p));
  CHECK(file_exists(fx.work + "/m.txt"));
  CHECK(file_exists(fx.work + "/s1.sock"));
  CHECK(has_violation(fx, "file-write*", fx.work + "/old.pem"));
  CHECK(has_violation(fx, "file-write-create", fx.work + "/n.key"));
}

TEST_CASE("X1: O_TMPFILE + linkat, through /proc/self/fd and AT_EMPTY_PATH", "[X1][P7][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, with_work(fx, py_calls(R"(
def tmp():
    fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600); os.write(fd, b'T'); return fd
a = tmp(); t('proc_bad', lambda: os.link('/proc/self/fd/%d' % a, 'tmp.pem', follow_symlinks=True))
t('proc_ok', lambda: os.link('/proc/self/fd/%d' % a, 'tmp.txt', follow_symlinks=True))
b = tmp()
def empty(name):
    if libc.linkat(b, b'', -100, name.encode(), 0x1000) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
t('empty_bad', lambda: empty('tmp2.key'))
t('empty_ok', lambda: empty('tmp2.txt'))
)")));
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("proc_bad") == "EACCES");
  CHECK(r.get("proc_ok") == "ok");
  CHECK(r.get("empty_bad") == "EACCES");
  CHECK(r.get("empty_ok") == "ok");
  CHECK_FALSE(file_exists(fx.work + "/tmp.pem"));
  CHECK_FALSE(file_exists(fx.work + "/tmp2.key"));
  CHECK(read_file(fx.work + "/tmp.txt") == "T");
}

TEST_CASE("X1: O_CREAT through a dangling symlink is decided on the target", "[X1][P7][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, "cd " + fx.work + "\nln -s d/target.pem innocent.txt; mkdir d\n( echo x > innocent.txt ) 2>/dev/null; echo @@dangling=$?\n"
                        "ln -s ok.txt fine; echo y > fine; echo @@fine=$?");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("dangling") != "0");
  CHECK(r.get("fine") == "0");
  CHECK_FALSE(file_exists(fx.work + "/d/target.pem"));
  CHECK(read_file(fx.work + "/ok.txt") == "y\n");
  CHECK(has_violation(fx, "file-write-create", fx.work + "/d/target.pem"));
}

TEST_CASE("X1: a path flipped between an allowed and a forbidden name by a second thread never creates the forbidden one",
          "[X1][P7][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, with_work(fx, py(R"(
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(b'race.txt', 16)
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, b'race.pem', 8)
        ctypes.memmove(buf, b'race.txt', 8)
th = threading.Thread(target=flip); th.start()
made = 0
for i in range(100000):
    fd = libc.open(buf, os.O_CREAT | os.O_WRONLY, 0o644)
    if fd >= 0:
        made += 1; os.close(fd)
stop = True; th.join()
print('@@made=%d' % made)
print('@@pem=%s' % os.path.exists('race.pem'))
)")));
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("pem") == "False");
  CHECK(r.get("made") != "0");
  CHECK_FALSE(file_exists(fx.work + "/race.pem"));
  CHECK(file_exists(fx.work + "/race.txt"));
}

TEST_CASE("X1: a signal storm with SA_RESTART gives no spurious EEXIST and leaks no descriptor", "[X1][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, with_work(fx, py(R"(
import os, signal, threading, time
signal.signal(signal.SIGUSR1, lambda *a: None)
signal.siginterrupt(signal.SIGUSR1, False)
stop = False
pid = os.getpid()
def storm():
    while not stop:
        os.kill(pid, signal.SIGUSR1)
th = threading.Thread(target=storm); th.start()
bad = 0
for i in range(3000):
    try:
        fd = os.open('s%d.txt' % i, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644); os.close(fd)
    except FileExistsError:
        bad += 1
stop = True; th.join()
print('@@eexist=%d' % bad)
print('@@fds=%d' % len(os.listdir('/proc/self/fd')))
)")));
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("eexist") == "0");
  // stdin, stdout, stderr and listdir's own descriptor.
  CHECK(r.get("fds") == "4");
}

// The broker runs in ccsb-init, the sandbox's PID 1 (bwrap --as-pid-1): the
// command's SIGKILL and SIGSTOP do not reach it, and the broker keeps
// deciding. As PID 2 this kill would end the session (a broker killed from
// the host ends the whole sandbox: test_exec.cpp, "S7: a supervisor killed
// from the host ...").
TEST_CASE("X1 L1: the command can neither kill nor stop the broker, and its creations still go through it", "[X1][L1][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, "cd " + fx.work + "\necho @@started=1\nkill -STOP $PPID; kill -KILL $PPID; kill -KILL 1\n"
                        "for i in $(seq 1 20); do ( echo x > after$i.txt ) 2>/dev/null && echo @@made=$i; done\n"
                        "( echo x > late.pem ) 2>/dev/null; echo @@pem=$?\n"
                        "echo @@parent=$(cat /proc/$PPID/comm)");
  INFO(r.describe());
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("started") == "1");
  CHECK(r.get("made") == "20");
  CHECK(r.get("parent") == "ccsb-init");
  CHECK(failed(r.get("pem")));
  for (int i = 1; i <= 20; ++i) CHECK(file_exists(fx.work + "/after" + std::to_string(i) + ".txt"));
  CHECK_FALSE(file_exists(fx.work + "/late.pem"));
  CHECK(has_violation(fx, "file-write-create", fx.work + "/late.pem"));
}

TEST_CASE("X1: the command cannot install a nested notification listener", "[X1][escape]") {
  sandbox_fixture fx;
  auto r = dispatch(fx, with_work(fx, py(R"(
import ctypes, struct, errno
libc = ctypes.CDLL(None, use_errno=True)
ins = struct.pack('HBBI', 0x06, 0, 0, 0x7fff0000)  # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
prog_buf = ctypes.create_string_buffer(ins)
class fprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]
p = fprog(1, ctypes.cast(prog_buf, ctypes.c_void_p))
libc.prctl(38, 1, 0, 0, 0)
rc = libc.syscall(317, 1, 8, ctypes.byref(p))  # seccomp(SET_MODE_FILTER, NEW_LISTENER)
print('@@listener=%s' % ('ok' if rc >= 0 else errno.errorcode.get(ctypes.get_errno())))
)")));
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("listener") != "ok");
  CHECK(r.get("listener") != "<missing>");
}

TEST_CASE("X1/P5: nested repositories, .git files and git paths stay out of reach", "[X1][P5][escape]") {
  sandbox_fixture fx;
  make_dirs(fx.work + "/nested");
  run_host_ok({"/usr/bin/git", "init", "-q", fx.work + "/nested"});
  std::string nested_config = read_file(fx.work + "/nested/.git/config");
  make_dirs(fx.work + "/wt");
  write_file(fx.work + "/wt/.git", "gitdir: ../.git/worktrees/wt\n");
  hand_to_sandbox_uid(fx.base);
  auto r = dispatch(fx, "cd " + fx.work + "\n"
                        "( printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> nested/.git/config ) 2>/dev/null; echo @@config=$?\n"
                        "( echo '#!/bin/sh' > nested/.git/hooks/post-checkout ) 2>/dev/null; echo @@hook=$?\n"
                        "( echo 'gitdir: ../evil' > wt/.git ) 2>/dev/null; echo @@gitfile=$?\n"
                        "mkdir -p new/x; ( echo 'gitdir: /tmp' > new/x/.git ) 2>/dev/null; echo @@newgitfile=$?\n"
                        "mkdir new/.git 2>/dev/null; echo @@mkdirgit=$?\n"
                        "mkdir -p evil/hooks && echo '[core]' > evil/config && mv evil new/y/.git 2>/dev/null; mkdir -p new/y; mv evil new/y/.git 2>/dev/null; echo @@mvgit=$?\n"
                        "( echo x > nested/.git/description ) 2>/dev/null; echo @@desc=$?\n"
                        "git -C nested status >/dev/null 2>&1; echo @@status=$?");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("config") != "0");
  CHECK(r.get("hook") != "0");
  CHECK(r.get("gitfile") != "0");
  CHECK(r.get("newgitfile") != "0");
  CHECK(r.get("mkdirgit") != "0");
  CHECK(r.get("mvgit") != "0");
  CHECK(r.get("desc") == "0");   // the rest of a .git stays writable
  CHECK(r.get("status") == "0"); // git still works on the nested repo
  CHECK(read_file(fx.work + "/nested/.git/config") == nested_config);
  CHECK_FALSE(file_exists(fx.work + "/nested/.git/hooks/post-checkout"));
  CHECK(read_file(fx.work + "/wt/.git") == "gitdir: ../.git/worktrees/wt\n");
  CHECK_FALSE(file_exists(fx.work + "/new/x/.git"));
  CHECK_FALSE(file_exists(fx.work + "/new/.git"));
  CHECK_FALSE(file_exists(fx.work + "/new/y/.git"));
  CHECK(has_violation(fx, "file-write*", fx.work + "/nested/.git/config"));
}

TEST_CASE("X1 P5: a symlink renamed or exchanged or hard-linked into a nested repository's git directory is refused",
          "[X1][P5][escape]") {
  sandbox_fixture fx;
  make_dirs(fx.work + "/nested");
  run_host_ok({"/usr/bin/git", "init", "-q", fx.work + "/nested"});
  make_dirs(fx.work + "/nested/.git/modules/foo");
  write_file(fx.work + "/nested/.git/modules/foo/config", "[core]\n");
  hand_to_sandbox_uid(fx.base);
  const std::string m = fx.work + "/nested/.git/modules";
  auto r = dispatch(fx, with_work(fx, py_calls(R"(
os.mkdir('evil')
with open('evil/config', 'w') as f: f.write('[core]\n\tfsmonitor = touch /tmp/pwned\n')
for n in ('l1', 'l2', 'l3', 'l4'): os.symlink('../../../evil', n)
t('exchange', lambda: renameat2('l1', 'nested/.git/modules/foo', 2))
t('rename', lambda: os.rename('l2', 'nested/.git/modules/bar'))
t('link', lambda: os.link('l3', 'nested/.git/modules/baz', follow_symlinks=False))
fd = os.open('l4', os.O_PATH | os.O_NOFOLLOW)
t('link_fd', lambda: os.link('/proc/self/fd/%d' % fd, 'nested/.git/modules/qux'))
with open('plain', 'w') as f: f.write('x\n')
t('file_ok', lambda: os.rename('plain', 'nested/.git/description'))
)")));
  ESCAPE_REQUIRE_RAN(r);
  for (const char* k : {"exchange", "rename", "link", "link_fd"}) {
    INFO(k);
    CHECK(r.get(k) == "EACCES");
  }
  CHECK(r.get("file_ok") == "ok"); // a file renamed into a .git stays allowed (git's own lock-and-rename)
  CHECK(read_file(m + "/foo/config") == "[core]\n");
  for (const char* n : {"/bar", "/baz", "/qux"}) {
    INFO(n);
    CHECK_FALSE(file_exists(m + n));
  }
  CHECK(has_violation(fx, "file-write-create", m + "/bar"));
}

TEST_CASE("X1 L3: a host Unix socket inside the worktree is not reachable, the session's own is", "[X1][L3][escape]") {
  sandbox_fixture fx;
  std::string path = fx.work + "/host.sock";
  int ls = host_unix_socket(path, SOCK_STREAM);
  hand_to_sandbox_uid(fx.base);
  auto r = dispatch(fx, with_work(fx, py(R"(
import socket, errno, os
def t(name, f):
    try:
        f(); print('@@%s=ok' % name)
    except OSError as e:
        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)))
c = socket.socket(socket.AF_UNIX); t('host', lambda: c.connect('host.sock'))
srv = socket.socket(socket.AF_UNIX); srv.bind('mine.sock'); srv.listen(1)
c2 = socket.socket(socket.AF_UNIX); t('own', lambda: c2.connect('mine.sock'))
os.symlink('host.sock', 'via-link')
c3 = socket.socket(socket.AF_UNIX); t('link', lambda: c3.connect('via-link'))
)")));
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("host") == "EPERM");
  CHECK(r.get("link") == "EPERM");
  CHECK(r.get("own") == "ok");
  pollfd p{ls, POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 0); // nothing arrived at the host listener
  ::close(ls);
  CHECK(has_violation(fx, "network-outbound", "unix:" + path));
}

TEST_CASE("X1: tar x, cp -r, a compiler and a pip-style install work and stop at the forbidden names", "[X1][P7][escape]") {
  sandbox_fixture fx;
  make_dirs(fx.outside + "/src/pkg");
  write_file(fx.outside + "/src/pkg/mod.py", "X = 1\n");
  write_file(fx.outside + "/src/.env", "SECRET=1\n");
  write_file(fx.outside + "/src/x.pem", "PEM\n");
  write_file(fx.outside + "/src/main.c", "int main(void){return 0;}\n");
  run_host_ok({"/usr/bin/tar", "-C", fx.outside + "/src", "-cf", fx.home + "/src.tar", "."});
  hand_to_sandbox_uid(fx.base);
  auto r = dispatch(fx, "cd " + fx.work + "\n"
                        "mkdir t && tar -C t -xf " + fx.home + "/src.tar 2>/dev/null; echo @@tar=$?\n"
                        "mkdir /tmp/t && tar -C /tmp/t -xf " + fx.home + "/src.tar && cp -r /tmp/t c 2>/dev/null; echo @@cp=$?\n"
                        "cc -c t/main.c -o main.o && cc main.o -o main.bin; echo @@cc=$?\n"
                        "python3 -c \"import shutil; shutil.copytree('t/pkg', 'site/pkg'); open('site/pkg/cert.pem','w')\" 2>/dev/null; echo @@pip=$?");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("tar") != "0");
  CHECK(r.get("cp") != "0");
  CHECK(r.get("cc") == "0");
  CHECK(r.get("pip") != "0");
  CHECK(read_file(fx.work + "/t/pkg/mod.py") == "X = 1\n");
  CHECK(read_file(fx.work + "/c/pkg/mod.py") == "X = 1\n");
  CHECK(file_exists(fx.work + "/main.bin"));
  CHECK(file_exists(fx.work + "/site/pkg/mod.py"));
  for (const char* p : {"/t/.env", "/t/x.pem", "/c/.env", "/c/x.pem", "/site/pkg/cert.pem"}) CHECK_FALSE(file_exists(fx.work + p));
}

TEST_CASE("X1: git checkout of a repo holding .env and x.pem stops at those names, git init inside a root is refused",
          "[X1][P5][P7][escape]") {
  sandbox_fixture fx;
  std::string src = fx.outside + "/repo";
  make_dirs(src);
  run_host_ok({"/usr/bin/git", "init", "-q", src});
  write_file(src + "/.env", "S=1\n");
  write_file(src + "/x.pem", "P\n");
  write_file(src + "/ok.txt", "OK\n");
  run_host_ok({"/usr/bin/git", "-C", src, "add", "-A"});
  run_host_ok({"/usr/bin/git", "-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"});
  run_host_ok({"/usr/bin/git", "clone", "-q", "--bare", src, fx.home + "/repo.git"});
  hand_to_sandbox_uid(fx.base);
  auto r = dispatch(fx, "cd " + fx.work + "\nexport GIT_CONFIG_NOSYSTEM=1\n"
                        "git clone -q " + fx.home + "/repo.git /tmp/clone >/dev/null 2>&1; echo @@clone_tmp=$?\n"
                        "mkdir co && git --git-dir=/tmp/clone/.git --work-tree=co checkout -f HEAD -- . 2>/dev/null; echo @@checkout=$?\n"
                        "git clone -q " + fx.home + "/repo.git inroot >/dev/null 2>&1; echo @@clone_root=$?\n"
                        "git init -q newrepo >/dev/null 2>&1; echo @@init=$?");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("clone_tmp") == "0");
  CHECK(r.get("checkout") != "0");
  CHECK(read_file(fx.work + "/co/ok.txt") == "OK\n");
  CHECK_FALSE(file_exists(fx.work + "/co/.env"));
  CHECK_FALSE(file_exists(fx.work + "/co/x.pem"));
  CHECK(r.get("clone_root") != "0");
  CHECK(r.get("init") != "0");
  CHECK_FALSE(file_exists(fx.work + "/inroot/.git"));
  CHECK_FALSE(file_exists(fx.work + "/newrepo/.git"));
}

// The broker creates files itself with the caller's umask, cached per thread
// and forgotten on every umask() (init/broker/notify_loop.hpp, "Caller
// facts"). The probe changes the umask in each way a cache could miss it (one
// thread; another thread of the process; a forked child; a clone(CLONE_FS)
// child sharing the umask, alive and then gone; 300 live threads, more than
// the cache holds) and prints what it created;
// the host, without a broker, is the reference. A cache that forgot only the
// calling process's umask gives 644 for shared_child_alive, one that never
// forgot gives 644 from thr_after on.
TEST_CASE("X1: brokered creations get the mode the kernel would give, through every umask change", "[X1][escape]") {
  const std::string probe = bin_path("umask_probe");
  REQUIRE(::access(probe.c_str(), X_OK) == 0);
  for (const char* mode : {"seq", "threads", "fork", "clonefs", "many"}) {
    DYNAMIC_SECTION("probe " << mode) {
      sandbox_fixture fx;
      const std::string inside = fx.work + "/umask_probe";
      write_file(inside, read_file(probe), 0755);
      ::mkdir((fx.work + "/d").c_str(), 0755);
      hand_to_sandbox_uid(fx.base);
      auto r = dispatch(fx, "\"" + inside + "\" " + mode + " \"" + fx.work + "/d\"; echo @@probe=$?");
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("probe") == "0");
      const std::string ref = fx.base + "/host-d";
      ::mkdir(ref.c_str(), 0755);
      auto host = run_host({probe, mode, ref});
      REQUIRE(host.exit_code == 0);
      INFO("host:\n" << host.out << "sandbox:\n" << r.out);
      const auto want = host.kv();
      CHECK(want.size() >= 3);
      for (const auto& [key, value] : want) CHECK(r.get(key) == value);
    }
  }
}
