/* kr_exchange_timed: a request written and its reply's first line read over
 * a child's pipes, the two clock readings around the child's own work; a
 * reply that ends (EOF), a reader that is gone (EPIPE), a deadline, a signal
 * (back to the caller at once, whose handlers must run), a watched
 * descriptor that speaks first, a reply with no newline in the room given,
 * and the arguments it refuses. */
#include <kreward/kreward.h>
#include <kreward/sys/exchange.h>

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* What the child does with the request it reads. */
enum child_act { ANSWER_AFTER_30MS, CLOSE_AT_ONCE, NEVER_ANSWER, ANSWER_IN_PIECES, ANSWER_NO_NEWLINE };

typedef struct {
    pid_t pid;
    int wfd, rfd; /* this side's: requests to the child, its replies */
} child;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static child start_child(enum child_act act)
{
    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(to_child[1]);
        close(from_child[0]);
        char buf[64];
        ssize_t n = read(to_child[0], buf, sizeof buf);
        (void)n;
        if (act == ANSWER_AFTER_30MS) {
            sleep_ms(30);
            (void)!write(from_child[1], "{\"ok\": true}\nrest", 17);
        } else if (act == ANSWER_IN_PIECES) {
            (void)!write(from_child[1], "{\"o", 3);
            sleep_ms(30);
            (void)!write(from_child[1], "k\": 1}\n", 7);
        } else if (act == ANSWER_NO_NEWLINE) {
            (void)!write(from_child[1], "0123456789abcdef", 16);
            sleep_ms(200);
        } else if (act == NEVER_ANSWER) {
            sleep_ms(2000);
        }
        _exit(0);
    }
    close(to_child[0]);
    close(from_child[1]);
    return (child){pid, to_child[1], from_child[0]};
}

static void end_child(child c)
{
    close(c.wfd);
    close(c.rfd);
    kill(c.pid, SIGKILL);
    waitpid(c.pid, NULL, 0);
}

static void times_the_round_trip_and_keeps_what_came_after_the_line(void **state)
{
    (void)state;
    child c = start_child(ANSWER_AFTER_30MS);
    uint64_t t[2];
    size_t n[2];
    char reply[64];
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, -1, 5000), KR_OK);
    assert_int_equal(n[0], 3);
    assert_true(n[1] >= 13 && n[1] <= 17);
    assert_memory_equal(reply, "{\"ok\": true}\n", 13);
    /* the child's 30 ms inside the two readings, and no more than a scheduler's slack */
    assert_true(t[1] > t[0]);
    assert_true(t[1] - t[0] >= 30000000u);
    assert_true(t[1] - t[0] < 1000000000u);
    end_child(c);
}

static void a_line_in_pieces_is_timed_at_its_newline(void **state)
{
    (void)state;
    child c = start_child(ANSWER_IN_PIECES);
    uint64_t t[2];
    size_t n[2];
    char reply[64];
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, -1, 5000), KR_OK);
    assert_int_equal(n[1], 10);
    assert_memory_equal(reply, "{\"ok\": 1}\n", 10);
    assert_true(t[1] - t[0] >= 30000000u); /* not at the first piece */
    end_child(c);
}

static void an_ended_reply_a_deadline_and_no_room_say_so(void **state)
{
    (void)state;
    uint64_t t[2];
    size_t n[2];
    char reply[8];

    child c = start_child(CLOSE_AT_ONCE);
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, -1, 5000), KR_EIO);
    assert_int_equal(n[0], 3);
    assert_int_equal(n[1], 0);
    assert_int_equal(t[1], 0);
    /* the reader gone: the next request's write meets EPIPE (SIGPIPE ignored, as a caller must) */
    signal(SIGPIPE, SIG_IGN);
    waitpid(c.pid, NULL, 0);
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, -1, 5000), KR_EIO);
    assert_int_equal(n[0], 0);
    close(c.wfd);
    close(c.rfd);

    c = start_child(NEVER_ANSWER);
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, -1, 50),
                     KR_ETIMEOUT);
    assert_int_equal(n[0], 3);
    end_child(c);

    c = start_child(ANSWER_NO_NEWLINE);
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, -1, 5000),
                     KR_ETOOBIG);
    assert_int_equal(n[1], sizeof reply);
    end_child(c);
}

static void a_watched_descriptor_that_speaks_first_ends_the_wait(void **state)
{
    (void)state;
    child c = start_child(NEVER_ANSWER);
    int events[2];
    assert_int_equal(pipe(events), 0);
    assert_int_equal(write(events[1], "exited\n", 7), 7);
    uint64_t t[2];
    size_t n[2];
    char reply[8];
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, events[0], 5000),
                     KR_ESTATE);
    assert_int_equal(n[0], 3);
    assert_int_equal(n[1], 0);
    close(events[0]);
    close(events[1]);
    end_child(c);
}

static void on_alarm(int sig)
{
    (void)sig;
}

static void a_signal_returns_to_the_caller_at_once(void **state)
{
    (void)state;
    child c = start_child(NEVER_ANSWER);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: as an interpreter's handlers */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
    struct itimerval in_50ms = {{0, 0}, {0, 50000}};
    assert_int_equal(setitimer(ITIMER_REAL, &in_50ms, NULL), 0);
    uint64_t t[2];
    size_t n[2];
    char reply[8];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(kr_exchange_timed(t, n, reply, sizeof reply, c.wfd, "go\n", 3, c.rfd, -1, 5000),
                     KR_ECANCELED);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_int_equal(n[0], 3); /* the request went; what it read so far is said */
    assert_int_equal(n[1], 0);
    assert_true(b.tv_sec - a.tv_sec < 2); /* not the 5 s deadline */
    signal(SIGALRM, SIG_DFL);
    end_child(c);
}

static void refuses_what_it_cannot_use(void **state)
{
    (void)state;
    uint64_t t[2];
    size_t n[2];
    char reply[8];
    assert_int_equal(kr_exchange_timed(NULL, n, reply, 8, 1, "x", 1, 0, -1, 10), KR_EINVAL);
    assert_int_equal(kr_exchange_timed(t, NULL, reply, 8, 1, "x", 1, 0, -1, 10), KR_EINVAL);
    assert_int_equal(kr_exchange_timed(t, n, NULL, 8, 1, "x", 1, 0, -1, 10), KR_EINVAL);
    assert_int_equal(kr_exchange_timed(t, n, reply, 8, 1, NULL, 1, 0, -1, 10), KR_EINVAL);
    assert_int_equal(kr_exchange_timed(t, n, reply, 8, -1, "x", 1, 0, -1, 10), KR_EINVAL);
    assert_int_equal(kr_exchange_timed(t, n, reply, 8, 1, "x", 1, -1, -1, 10), KR_EINVAL);
    assert_int_equal(kr_exchange_timed(t, n, reply, 8, 1, "x", 1, 0, -1, -1), KR_EINVAL);
    assert_int_equal(n[0] + n[1], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(times_the_round_trip_and_keeps_what_came_after_the_line),
        cmocka_unit_test(a_line_in_pieces_is_timed_at_its_newline),
        cmocka_unit_test(an_ended_reply_a_deadline_and_no_room_say_so),
        cmocka_unit_test(a_watched_descriptor_that_speaks_first_ends_the_wait),
        cmocka_unit_test(a_signal_returns_to_the_caller_at_once),
        cmocka_unit_test(refuses_what_it_cannot_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
