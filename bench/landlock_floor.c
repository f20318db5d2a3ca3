/* The floor of a real sandbox on this host, for bench/spawn.sh: a minimal wrapper that
 * does what the cheapest confinement must (Landlock: read and execute everywhere, write
 * only beneath one directory; no new privileges) and then execs the command. No
 * namespaces, no seccomp, no limits, no supervision, no report: it is a reference point
 * for the cost of the kernel work alone, not a sandbox anyone should use.
 *
 *   cc -O2 -o landlock_floor bench/landlock_floor.c
 *   ./landlock_floor WRITABLE_DIR PROGRAM [ARGS...]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READ_EXEC (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define WRITE                                                                                              \
    (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |       \
     LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |             \
     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |          \
     LANDLOCK_ACCESS_FS_MAKE_SYM)

static int allow(int ruleset, const char *path, __u64 access) {
    struct landlock_path_beneath_attr rule = {.allowed_access = access};
    rule.parent_fd = open(path, O_PATH | O_CLOEXEC);
    if (rule.parent_fd < 0)
        return -1;
    int r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    close(rule.parent_fd);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s WRITABLE_DIR PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    struct landlock_ruleset_attr attr = {.handled_access_fs = READ_EXEC | WRITE};
    int ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0 || allow(ruleset, "/", READ_EXEC) || allow(ruleset, argv[1], READ_EXEC | WRITE) ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, ruleset, 0)) {
        perror("landlock_floor");
        return 125;
    }
    close(ruleset);
    execvp(argv[2], argv + 2);
    perror("landlock_floor: exec");
    return 127;
}
