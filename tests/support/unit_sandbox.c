/* unit_sandbox: runs a program under the sandbox a systemd unit describes,
 * for tests/sandbox.rs, which reads systemd/grove.service and turns each
 * directive into the options below (so the unit and the test cannot drift).
 * It plays the part of the service manager on a machine without systemd as
 * PID 1: it must run as root inside a mount and network namespace the test
 * made (never on the host's mounts), forks the service, and in the child
 * builds the unit's own mount namespace, drops to the service user, loads
 * the seccomp filters and execs the program.  The parent writes the child's
 * pid to --pidfile and exits with the child's status (128+signal).
 *
 *   unit_sandbox run [OPTIONS] -- PROGRAM ARGS...
 *                          (--loopback-up and --pidfile are the machine's;
 *                          every other option is one directive's effect)
 *   unit_sandbox probe     prints what the sandbox allows, one key=value a
 *                          line, for the test to compare with the unit
 *
 * Build: gcc -O1 -o unit_sandbox unit_sandbox.c -lseccomp
 *
 * Each option is one directive's effect, applied in the order systemd's
 * exec_child applies them: mounts (ProtectSystem, PrivateTmp, the
 * StateDirectory/RuntimeDirectory writable paths, PrivateDevices,
 * ProtectProc/ProcSubset, read-only and inaccessible paths), the UTS
 * namespace, the session keyring, the private user namespace (last of the
 * namespaces, as systemd does for a system service), groups and user,
 * capabilities, umask, no_new_privs, then seccomp filters with the
 * SystemCallFilter allow-list loaded last (it refuses seccomp() itself). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 64

static void die(const char *what) {
    fprintf(stderr, "unit_sandbox: %s: %s\n", what, strerror(errno));
    exit(125);
}

static void die_msg(const char *what, const char *detail) {
    fprintf(stderr, "unit_sandbox: %s: %s\n", what, detail);
    exit(125);
}

struct list {
    const char *item[MAX_LIST];
    int len;
};

static void push(struct list *l, const char *s) {
    if (l->len == MAX_LIST)
        die_msg("too many values", s);
    l->item[l->len++] = s;
}

struct plan {
    const char *pidfile;
    int loopback_up;
    int ro_root, private_tmp, private_dev, uts, keyring, userns;
    const char *proc_opts;
    struct list rw, ro, inaccessible, env;
    long uid, gid;
    int drop_bounding, clear_ambient, nnp;
    long umask_bits;
    const char *families;
    int mdwe, restrict_ns, lock_personality, restrict_realtime, restrict_suid;
    const char *allow_syscalls;
    int errno_number;
    struct list deny_syscalls;
    char **argv;
};

/* ---- mounts ---------------------------------------------------------- */

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void setattr(const char *path, unsigned set, unsigned clr, int recursive) {
    struct mount_attr attr = {.attr_set = set, .attr_clr = clr};
    if (syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr,
                sizeof attr) != 0)
        die(path);
}

static void bind_self(const char *path) {
    if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0)
        die(path);
}

/* ProtectSystem=strict: the whole tree read-only except the API file
 * systems /dev, /proc and /sys, which keep their own state. */
static void protect_system_strict(void) {
    static const char *api[] = {"/dev", "/proc", "/sys"};
    int writable[3];
    for (int i = 0; i < 3; i++) {
        struct statvfs vfs;
        writable[i] = statvfs(api[i], &vfs) == 0 && !(vfs.f_flag & ST_RDONLY);
    }
    setattr("/", MOUNT_ATTR_RDONLY, 0, 1);
    for (int i = 0; i < 3; i++)
        if (writable[i])
            setattr(api[i], 0, MOUNT_ATTR_RDONLY, 1);
}

static void private_tmp(void) {
    const char *dirs[] = {"/tmp", "/var/tmp"};
    for (int i = 0; i < 2; i++)
        if (mount("tmpfs", dirs[i], "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
            die(dirs[i]);
}

static void make_writable(const char *path) {
    bind_self(path);
    setattr(path, 0, MOUNT_ATTR_RDONLY, 1);
}

/* PrivateDevices=yes: a fresh /dev with the pseudo devices only. */
static void private_dev(void) {
    static const struct {
        const char *name;
        unsigned maj, min;
    } nodes[] = {{"null", 1, 3},    {"zero", 1, 5}, {"full", 1, 7},
                 {"random", 1, 8},  {"urandom", 1, 9}, {"tty", 5, 0}};
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") != 0)
        die("/dev");
    mode_t old = umask(0);
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/dev/%s", nodes[i].name);
        if (mknod(path, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) != 0)
            die(path);
    }
    if (mkdir("/dev/pts", 0755) != 0 ||
        mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620") != 0)
        die("/dev/pts");
    if (symlink("pts/ptmx", "/dev/ptmx") != 0)
        die("/dev/ptmx");
    if (mkdir("/dev/shm", 01777) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        die("/dev/shm");
    const char *links[][2] = {{"/proc/self/fd", "/dev/fd"},
                              {"/proc/self/fd/0", "/dev/stdin"},
                              {"/proc/self/fd/1", "/dev/stdout"},
                              {"/proc/self/fd/2", "/dev/stderr"}};
    for (int i = 0; i < 4; i++)
        if (symlink(links[i][0], links[i][1]) != 0)
            die(links[i][1]);
    umask(old);
}

/* ProtectProc= / ProcSubset=: a new proc instance with those options. */
static void mount_proc(const char *opts) {
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) != 0)
        die("/proc");
}

static void make_read_only(const char *path) {
    if (access(path, F_OK) != 0)
        return; /* systemd ignores a missing path here too */
    bind_self(path);
    setattr(path, MOUNT_ATTR_RDONLY, 0, 1);
}

/* What systemd mounts its /run/systemd/inaccessible nodes on: a directory
 * nobody may enter, or for a file an empty one with mode 0. */
static void make_inaccessible(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=000") != 0)
            die(path);
    } else {
        die_msg("inaccessible non-directory is not emulated", path);
    }
}

/* ---- user namespace -------------------------------------------------- */

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        die(path);
    close(fd);
}

/* PrivateUsers=yes for a system service: a user namespace mapping root and
 * the service user (and group) to themselves and nothing else.  The maps
 * are written from the parent namespace by a short-lived helper, as systemd
 * does. */
static void private_users(long uid, long gid) {
    int go[2];
    if (pipe(go) != 0)
        die("pipe");
    pid_t self = getpid();
    pid_t writer = fork();
    if (writer < 0)
        die("fork");
    if (writer == 0) {
        char byte, path[64], map[128];
        close(go[1]);
        if (read(go[0], &byte, 1) != 1)
            _exit(1);
        snprintf(map, sizeof map, "0 0 1\n%ld %ld 1\n", uid, uid);
        snprintf(path, sizeof path, "/proc/%d/uid_map", self);
        write_file(path, map);
        snprintf(map, sizeof map, "0 0 1\n%ld %ld 1\n", gid, gid);
        snprintf(path, sizeof path, "/proc/%d/gid_map", self);
        write_file(path, map);
        _exit(0);
    }
    close(go[0]);
    if (unshare(CLONE_NEWUSER) != 0)
        die("unshare(CLONE_NEWUSER)");
    if (write(go[1], "x", 1) != 1)
        die("pipe write");
    int status;
    if (waitpid(writer, &status, 0) != writer || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        die_msg("private users", "the map writer failed");
    close(go[1]);
}

/* ---- seccomp --------------------------------------------------------- */

static const struct {
    const char *name;
    int number;
} families[] = {
    {"AF_UNIX", AF_UNIX},       {"AF_LOCAL", AF_LOCAL},   {"AF_INET", AF_INET},
    {"AF_INET6", AF_INET6},     {"AF_NETLINK", AF_NETLINK}, {"AF_PACKET", AF_PACKET},
    {"AF_BLUETOOTH", AF_BLUETOOTH}, {"AF_ALG", AF_ALG},   {"AF_VSOCK", AF_VSOCK},
    {"AF_CAN", AF_CAN},         {"AF_KEY", AF_KEY},       {"AF_TIPC", AF_TIPC},
    {"AF_XDP", AF_XDP},         {"AF_RDS", AF_RDS},       {"AF_NFC", AF_NFC},
    {"AF_QIPCRTR", AF_QIPCRTR}, {"AF_SMC", AF_SMC},       {"AF_APPLETALK", AF_APPLETALK},
    {"AF_AX25", AF_AX25},       {"AF_X25", AF_X25},       {"AF_IPX", AF_IPX},
};

static int family_number(const char *name) {
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].name, name) == 0)
            return families[i].number;
    die_msg("unknown address family", name);
    return -1;
}

static scmp_filter_ctx new_filter(uint32_t def) {
    scmp_filter_ctx ctx = seccomp_init(def);
    if (!ctx)
        die_msg("seccomp_init", "failed");
    /* SystemCallArchitectures=native: only the native ABI is in the
     * filters; any other ABI hits the bad-arch action. */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0)
        die_msg("seccomp_attr_set", "bad arch");
    return ctx;
}

static void rule(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned count,
                 struct scmp_arg_cmp a, struct scmp_arg_cmp b) {
    int r = count == 0   ? seccomp_rule_add(ctx, action, nr, 0)
            : count == 1 ? seccomp_rule_add(ctx, action, nr, 1, a)
                         : seccomp_rule_add(ctx, action, nr, 2, a, b);
    if (r != 0) {
        errno = -r;
        die("seccomp_rule_add");
    }
}

#define NOARG SCMP_A0(SCMP_CMP_EQ, 0)

static void load(scmp_filter_ctx ctx, const char *what) {
    int r = seccomp_load(ctx);
    if (r != 0) {
        errno = -r;
        die(what);
    }
    seccomp_release(ctx);
}

/* RestrictAddressFamilies=LIST: socket() with any other family fails with
 * EAFNOSUPPORT (systemd's rules: below the lowest, above the highest, and
 * each gap between). */
static void restrict_families(const char *list) {
    int allowed[MAX_LIST], n = 0, lo = 1 << 30, hi = -1;
    char *copy = strdup(list);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_LIST)
            die_msg("too many families", list);
        allowed[n] = family_number(tok);
        if (allowed[n] < lo)
            lo = allowed[n];
        if (allowed[n] > hi)
            hi = allowed[n];
        n++;
    }
    scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
    uint32_t refuse = SCMP_ACT_ERRNO(EAFNOSUPPORT);
    rule(ctx, refuse, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_LT, lo), NOARG);
    rule(ctx, refuse, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GT, hi), NOARG);
    for (int v = lo + 1; v < hi; v++) {
        int ok = 0;
        for (int i = 0; i < n; i++)
            ok |= allowed[i] == v;
        if (!ok)
            rule(ctx, refuse, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, v), NOARG);
    }
    load(ctx, "RestrictAddressFamilies");
    free(copy);
}

/* MemoryDenyWriteExecute=yes: no mapping both writable and executable,
 * no mprotect to executable, no executable SysV shared memory. */
static void memory_deny_write_execute(void) {
    scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
    uint32_t no = SCMP_ACT_ERRNO(EPERM);
    rule(ctx, no, SCMP_SYS(mmap), 1,
         SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC | PROT_WRITE, PROT_EXEC | PROT_WRITE), NOARG);
    rule(ctx, no, SCMP_SYS(mprotect), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC),
         NOARG);
    rule(ctx, no, SCMP_SYS(pkey_mprotect), 1,
         SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC), NOARG);
    rule(ctx, no, SCMP_SYS(shmat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC), NOARG);
    load(ctx, "MemoryDenyWriteExecute");
}

/* RestrictNamespaces=yes: no new namespace of any kind and no setns;
 * clone3 answers ENOSYS so that libc falls back to clone. */
static void restrict_namespaces(void) {
    static const unsigned long kinds[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                          CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                          CLONE_NEWNET};
    scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
    uint32_t no = SCMP_ACT_ERRNO(EPERM);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        rule(ctx, no, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, kinds[i], kinds[i]),
             NOARG);
        rule(ctx, no, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, kinds[i], kinds[i]),
             NOARG);
    }
    rule(ctx, no, SCMP_SYS(setns), 0, NOARG, NOARG);
    rule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0, NOARG, NOARG);
    load(ctx, "RestrictNamespaces");
}

/* LockPersonality=yes: personality() may only keep PER_LINUX. */
static void lock_personality(void) {
    scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
    rule(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
         SCMP_A0(SCMP_CMP_NE, PER_LINUX), NOARG);
    load(ctx, "LockPersonality");
}

/* RestrictRealtime=yes: no SCHED_FIFO, SCHED_RR or SCHED_DEADLINE. */
static void restrict_realtime(void) {
    static const int policies[] = {1 /* FIFO */, 2 /* RR */, 6 /* DEADLINE */};
    scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
    for (int i = 0; i < 3; i++)
        rule(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sched_setscheduler), 1,
             SCMP_A1(SCMP_CMP_MASKED_EQ, 0x3fffffff, policies[i]), NOARG);
    load(ctx, "RestrictRealtime");
}

/* RestrictSUIDSGID=yes: no set-user-ID or set-group-ID bit by chmod or
 * by creating a file; openat2 answers ENOSYS (its mode is in a struct). */
static void restrict_suid_sgid(void) {
    static const unsigned long bits[] = {S_ISUID, S_ISGID};
    scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
    uint32_t no = SCMP_ACT_ERRNO(EPERM);
    for (int i = 0; i < 2; i++) {
        unsigned long b = bits[i];
        rule(ctx, no, SCMP_SYS(chmod), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, b, b), NOARG);
        rule(ctx, no, SCMP_SYS(fchmod), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, b, b), NOARG);
        rule(ctx, no, SCMP_SYS(fchmodat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, b, b), NOARG);
        rule(ctx, no, SCMP_SYS(creat), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, b, b), NOARG);
        rule(ctx, no, SCMP_SYS(open), 2, SCMP_A1(SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT),
             SCMP_A2(SCMP_CMP_MASKED_EQ, b, b));
        rule(ctx, no, SCMP_SYS(openat), 2, SCMP_A2(SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT),
             SCMP_A3(SCMP_CMP_MASKED_EQ, b, b));
    }
    rule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0, NOARG, NOARG);
    load(ctx, "RestrictSUIDSGID");
}

/* Syscalls named in a comma list that this architecture has. */
static void each_syscall(const char *list, scmp_filter_ctx ctx, uint32_t action) {
    char *copy = strdup(list);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        int nr = seccomp_syscall_resolve_name(tok);
        if (nr < 0)
            continue; /* not a syscall on this architecture: systemd skips it too */
        rule(ctx, action, nr, 0, NOARG, NOARG);
    }
    free(copy);
}

/* ---- the service ----------------------------------------------------- */

static void become_service(struct plan *p) {
    if (unshare(CLONE_NEWNS | (p->uts ? CLONE_NEWUTS : 0)) != 0)
        die("unshare(CLONE_NEWNS)");
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
        die("slave /");
    if (p->ro_root)
        protect_system_strict();
    if (p->private_tmp)
        private_tmp();
    for (int i = 0; i < p->rw.len; i++)
        make_writable(p->rw.item[i]);
    if (p->private_dev)
        private_dev();
    if (p->proc_opts)
        mount_proc(p->proc_opts);
    for (int i = 0; i < p->ro.len; i++)
        make_read_only(p->ro.item[i]);
    for (int i = 0; i < p->inaccessible.len; i++)
        make_inaccessible(p->inaccessible.item[i]);
    if (p->keyring && syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0)
        die("keyctl(JOIN_SESSION_KEYRING)");
    if (p->userns)
        private_users(p->uid, p->gid);
    if (p->drop_bounding)
        for (int cap = 0; prctl(PR_CAPBSET_READ, cap) >= 0; cap++)
            if (prctl(PR_CAPBSET_DROP, cap) != 0)
                die("PR_CAPBSET_DROP");
    if (p->clear_ambient && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
        die("PR_CAP_AMBIENT_CLEAR_ALL");
    if (p->gid >= 0) {
        gid_t g = (gid_t)p->gid;
        if (setgroups(0, NULL) != 0 || setresgid(g, g, g) != 0)
            die("setresgid");
    }
    if (p->uid >= 0) {
        uid_t u = (uid_t)p->uid;
        if (setresuid(u, u, u) != 0)
            die("setresuid");
    }
    if (p->umask_bits >= 0)
        umask((mode_t)p->umask_bits);
    if (p->nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        die("PR_SET_NO_NEW_PRIVS");
    if (p->families)
        restrict_families(p->families);
    if (p->mdwe)
        memory_deny_write_execute();
    if (p->restrict_ns)
        restrict_namespaces();
    if (p->lock_personality)
        lock_personality();
    if (p->restrict_realtime)
        restrict_realtime();
    if (p->restrict_suid)
        restrict_suid_sgid();
    for (int i = 0; i < p->deny_syscalls.len; i++) {
        scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
        each_syscall(p->deny_syscalls.item[i], ctx, SCMP_ACT_ERRNO(EPERM));
        load(ctx, "implied syscall deny list");
    }
    if (p->allow_syscalls) {
        scmp_filter_ctx ctx = new_filter(SCMP_ACT_ERRNO(p->errno_number));
        each_syscall(p->allow_syscalls, ctx, SCMP_ACT_ALLOW);
        load(ctx, "SystemCallFilter");
    }
    char pid[32];
    snprintf(pid, sizeof pid, "WATCHDOG_PID=%d", getpid());
    char **env = calloc((size_t)p->env.len + 2, sizeof *env);
    for (int i = 0; i < p->env.len; i++)
        env[i] = (char *)p->env.item[i];
    env[p->env.len] = pid;
    execve(p->argv[0], p->argv, env);
    die(p->argv[0]);
}

/* The machine's network namespace starts with lo down. */
static void loopback_up(void) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) != 0)
        die("SIOCGIFFLAGS lo");
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
        die("SIOCSIFFLAGS lo");
    close(fd);
}

static int run(struct plan *p) {
    if (p->loopback_up)
        loopback_up();
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0)
        become_service(p);
    if (p->pidfile) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", p->pidfile);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", child) < 0 || fclose(f) != 0 || rename(tmp, p->pidfile) != 0)
            die(p->pidfile);
    }
    /* The manager ignores the signals an operator sends to the service. */
    signal(SIGTERM, SIG_IGN);
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            die("waitpid");
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "unit_sandbox: service killed by signal %d\n", WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}

/* ---- probe: what the sandbox lets a program do ----------------------- */

static void report(const char *key, int r) {
    if (r >= 0)
        printf("%s=ok\n", key);
    else
        printf("%s=%s\n", key, strerrorname_np(errno));
}

static void status_field(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            char *v = line + n + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            printf("%s=%s\n", field, v);
        }
    if (f)
        fclose(f);
}

static void list_dir(const char *key, const char *path, int numeric_only) {
    DIR *d = opendir(path);
    if (!d) {
        printf("%s=%s\n", key, strerrorname_np(errno));
        return;
    }
    char out[4096] = "";
    struct dirent *e;
    int first = 1;
    /* sorted by the test; here in directory order */
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (numeric_only && (e->d_name[0] < '0' || e->d_name[0] > '9'))
            continue;
        if (strlen(out) + strlen(e->d_name) + 2 >= sizeof out)
            break;
        if (!first)
            strcat(out, " ");
        strcat(out, e->d_name);
        first = 0;
    }
    closedir(d);
    printf("%s=%s\n", key, out);
}

static int try_write(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/.probe", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(path);
    return 0;
}

static int probe(void) {
    gid_t groups[16];
    int ngroups = getgroups(16, groups);
    printf("uid=%d\ngid=%d\ngroups=%d\n", getuid(), getgid(), ngroups);
    mode_t old = umask(0);
    printf("umask=%04o\n", old);
    umask(old);
    status_field("CapEff");
    status_field("CapPrm");
    status_field("CapBnd");
    status_field("CapAmb");
    status_field("NoNewPrivs");
    status_field("Seccomp");
    int s;
    report("socket_unix", s = socket(AF_UNIX, SOCK_STREAM, 0));
    report("socket_inet", s = socket(AF_INET, SOCK_STREAM, 0));
    report("socket_inet6", s = socket(AF_INET6, SOCK_STREAM, 0));
    report("socket_netlink", s = socket(AF_NETLINK, SOCK_RAW, 0));
    report("socket_packet", s = socket(AF_PACKET, SOCK_RAW, 0));
    report("socket_vsock", s = socket(AF_VSOCK, SOCK_STREAM, 0));
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    report("mmap_wx", m == MAP_FAILED ? -1 : 0);
    m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report("mprotect_x", m == MAP_FAILED ? -1 : mprotect(m, 4096, PROT_READ | PROT_EXEC));
    report("unshare_user", unshare(CLONE_NEWUSER));
    report("unshare_net", unshare(CLONE_NEWNET));
    report("setns", setns(0, 0));
    report("personality_linux32", personality(PER_LINUX32));
    struct sched_param sp = {.sched_priority = 1};
    report("sched_fifo", sched_setscheduler(0, SCHED_FIFO, &sp));
    report("chroot", chroot("/"));
    report("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    /* the syscall itself: glibc's setrlimit() goes through prlimit64,
     * which @default allows (under systemd too) */
    report("setrlimit", (int)syscall(SYS_setrlimit, RLIMIT_NOFILE, &rl));
    report("sethostname", sethostname("x", 1));
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    report("clock_settime", clock_settime(CLOCK_REALTIME, &now));
    report("syslog", (int)syscall(SYS_syslog, 3 /* READ_ALL */, NULL, 0));
    report("init_module", (int)syscall(SYS_init_module, NULL, 0, ""));
    report("iopl", (int)syscall(SYS_iopl, 3));
    report("chown_self", chown("/tmp", getuid(), getgid()));
    report("write_usr", try_write("/usr"));
    report("write_etc", try_write("/etc"));
    const char *state = getenv("STATE_DIRECTORY");
    const char *runtime = getenv("RUNTIME_DIRECTORY");
    const char *config = getenv("CONFIGURATION_DIRECTORY");
    report("write_state", state ? try_write(state) : -1);
    report("write_runtime", runtime ? try_write(runtime) : -1);
    report("write_config", config ? try_write(config) : -1);
    report("write_tmp", try_write("/tmp"));
    report("write_var_tmp", try_write("/var/tmp"));
    report("write_sys", try_write("/sys/kernel"));
    report("write_dev_shm", try_write("/dev/shm"));
    if (state) {
        char path[4096];
        snprintf(path, sizeof path, "%s/.suid", state);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        report("chmod_suid", fd < 0 ? -1 : fchmod(fd, 04755));
        if (fd >= 0)
            close(fd);
        unlink(path);
    }
    list_dir("tmp", "/tmp", 0);
    list_dir("home", "/home", 0);
    list_dir("root", "/root", 0);
    list_dir("dev", "/dev", 0);
    list_dir("proc_pids", "/proc", 1);
    report("proc_cpuinfo", access("/proc/cpuinfo", F_OK));
    report("proc_sys", access("/proc/sys", F_OK));
    printf("pid=%d\n", getpid());
    printf("ppid=%d\n", getppid());
    return 0;
}

/* ---- options --------------------------------------------------------- */

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "probe") == 0)
        return probe();
    if (argc < 2 || strcmp(argv[1], "run") != 0)
        die_msg("usage", "unit_sandbox run [OPTIONS] -- PROGRAM ARGS... | unit_sandbox probe");
    struct plan p = {.uid = -1, .gid = -1, .umask_bits = -1, .errno_number = EPERM};
    int i = 2;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define FLAG(name, field) \
    if (strcmp(o, name) == 0) { \
        p.field = 1; \
        continue; \
    }
#define VALUE(name) if (strcmp(o, name) == 0 && v && ++i)
        FLAG("--loopback-up", loopback_up)
        FLAG("--ro-root", ro_root)
        FLAG("--private-tmp", private_tmp)
        FLAG("--private-dev", private_dev)
        FLAG("--uts", uts)
        FLAG("--keyring", keyring)
        FLAG("--userns", userns)
        FLAG("--drop-bounding", drop_bounding)
        FLAG("--clear-ambient", clear_ambient)
        FLAG("--nnp", nnp)
        FLAG("--mdwe", mdwe)
        FLAG("--restrict-ns", restrict_ns)
        FLAG("--lock-personality", lock_personality)
        FLAG("--restrict-realtime", restrict_realtime)
        FLAG("--restrict-suid", restrict_suid)
        VALUE("--pidfile") { p.pidfile = v; continue; }
        VALUE("--proc") { p.proc_opts = v; continue; }
        VALUE("--rw") { push(&p.rw, v); continue; }
        VALUE("--ro") { push(&p.ro, v); continue; }
        VALUE("--inaccessible") { push(&p.inaccessible, v); continue; }
        VALUE("--env") { push(&p.env, v); continue; }
        VALUE("--uid") { p.uid = strtol(v, NULL, 10); continue; }
        VALUE("--gid") { p.gid = strtol(v, NULL, 10); continue; }
        VALUE("--umask") { p.umask_bits = strtol(v, NULL, 8); continue; }
        VALUE("--families") { p.families = v; continue; }
        VALUE("--allow-syscalls") { p.allow_syscalls = v; continue; }
        VALUE("--errno") { p.errno_number = (int)strtol(v, NULL, 10); continue; }
        VALUE("--deny-syscalls") { push(&p.deny_syscalls, v); continue; }
        die_msg("unknown option", o);
    }
    if (i + 1 >= argc)
        die_msg("usage", "missing -- PROGRAM");
    p.argv = argv + i + 1;
    if (!is_dir("/proc/self"))
        die_msg("needs", "/proc");
    return run(&p);
}
