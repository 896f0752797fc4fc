/* What a test reads about another process from /proc (header only): CPU ticks used, resident
 * memory, open descriptors, wake-ups. Each returns -1 when the process or the field cannot be read. */
#ifndef CX_PROC_STAT_H
#define CX_PROC_STAT_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* utime + stime, in clock ticks (sysconf(_SC_CLK_TCK) a second). */
static inline long proc_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (long)(ut + st);
}

/* Voluntary context switches of all the process's threads so far: how often they slept
 * and woke (a thread on a 20 ms tick adds 50 a second). */
static inline long proc_wakeups(pid_t pid)
{
    char path[96], line[256];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    long sum = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%.20s/status", (int)pid, e->d_name);
        FILE *f = fopen(path, "r");
        long v;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
                sum += v;
        if (f)
            fclose(f);
    }
    closedir(d);
    return sum;
}

/* VmRSS in KiB. */
static inline long proc_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* Open file descriptors. */
static inline int proc_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

#endif
