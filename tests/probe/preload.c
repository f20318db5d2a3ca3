/* A library the security suite loads into every process of a run through
 * LD_PRELOAD (priv_loader_env_reaches_only_confined_processes). Its constructor
 * tries to leave two marks outside the sandbox: a file appended at
 * $PRELOAD_MARK_FILE and a byte written into the FIFO $PRELOAD_MARK_FIFO. A mark
 * proves it ran in a process that was not yet confined (bubblewrap itself, or a
 * stage helper before its Landlock and seccomp). Nothing else is done. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void leave_marks(void) {
    const char *file = getenv("PRELOAD_MARK_FILE");
    const char *fifo = getenv("PRELOAD_MARK_FIFO");
    if (file) {
        int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            (void)!write(fd, "x", 1);
            close(fd);
        }
    }
    if (fifo) {
        int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            (void)!write(fd, "x", 1);
            close(fd);
        }
    }
}
