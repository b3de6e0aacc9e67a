/* The disk cache's folders and files are trusted only when they are this
 * user's and nobody else can write them: another local user must not be able
 * to plant a compiled binary that a context would load and run. Everything
 * is opened relative to a checked folder descriptor (openat), so a folder
 * swapped after its check is never followed. */
#include "common/cache_disk_impl.h"
#include "common/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kr__cache_trusted(int fd, const char *what, int want_dir, char *why, size_t why_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_size, "%s: %s", what, strerror(errno));
        return -1;
    }
    if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "%s is not a %s", what, want_dir ? "folder" : "regular file");
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(why, why_size, "%s belongs to uid %u, not to this user (uid %u): not used", what,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, why_size, "%s is writable by %s (mode %04o): not used", what,
                 (st.st_mode & S_IWOTH) ? "everyone" : "its group", (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

/* mkdir -p, every folder it makes 0700 (the umask may only narrow it). */
static int make_dirs(const char *path)
{
    char tmp[4096];
    kr__strlcpy(tmp, path, sizeof tmp);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return (mkdir(tmp, 0700) != 0 && errno != EEXIST) ? -1 : 0;
}

int kr__cache_dir_open(const char *dir, int create, char *why, size_t why_size)
{
    if (create && make_dirs(dir) != 0) {
        snprintf(why, why_size, "cannot create %s: %s", dir, strerror(errno));
        return KR__CACHE_DIR_ERROR;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return KR__CACHE_DIR_MISSING;
        snprintf(why, why_size, "cannot open %s: %s", dir, strerror(errno));
        return KR__CACHE_DIR_ERROR;
    }
    char what[4200];
    snprintf(what, sizeof what, "cache folder %s", dir);
    if (kr__cache_trusted(fd, what, 1, why, why_size) != 0) {
        close(fd);
        return KR__CACHE_DIR_ERROR;
    }
    return fd;
}

int kr__cache_subdir_open(int dirfd, const char *dir, const char *name, int create, char *why,
                          size_t why_size)
{
    if (create && mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST) {
        snprintf(why, why_size, "cannot create %s/%s: %s", dir, name, strerror(errno));
        return KR__CACHE_DIR_ERROR;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return KR__CACHE_DIR_MISSING;
        snprintf(why, why_size, "cannot open %s/%s: %s", dir, name, strerror(errno));
        return KR__CACHE_DIR_ERROR;
    }
    char what[4200];
    snprintf(what, sizeof what, "cache folder %s/%s", dir, name);
    if (kr__cache_trusted(fd, what, 1, why, why_size) != 0) {
        close(fd);
        return KR__CACHE_DIR_ERROR;
    }
    return fd;
}
