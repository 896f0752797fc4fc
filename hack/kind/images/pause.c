/* pause: the sandbox process of every pod in the Conflux kind node image.
 *
 * It holds the pod's namespaces open and does nothing else: it sleeps until a
 * signal arrives, reaps any child that was reparented to it (it is PID 1 of
 * the pod when the pod shares its PID namespace), and exits 0 on SIGINT or
 * SIGTERM. Built statically so that its image can be FROM scratch.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAUSE_VERSION "conflux-1"

static void on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	(void)sig;
	int saved = errno;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

static int install(int sig, void (*handler)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		printf("pause %s\n", PAUSE_VERSION);
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not PID 1\n");
	if (install(SIGINT, on_stop) < 0 || install(SIGTERM, on_stop) < 0 ||
	    install(SIGCHLD, on_child) < 0) {
		perror("pause: sigaction");
		return 1;
	}
	for (;;)
		pause();
	return 0; /* not reached */
}
