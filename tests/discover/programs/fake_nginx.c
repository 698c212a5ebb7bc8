/* A program named nginx, as another user could build one: served as a listener, it answers
 * every connection; run with -V or -T, as discovery runs nginx, it records who ran it (its
 * effective uid, in ran-PID beside its folder's `out`) and answers as nginx would, quoting
 * the first word of the file -c names. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void record(void) {
    char exe[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/../out/ran-%d", exe, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f) { fprintf(f, "%d\n", (int)geteuid()); fclose(f); }
}

static int dump(const char *conf) {
    FILE *f = fopen(conf, "r");
    if (!f) {
        fprintf(stderr, "nginx: [emerg] open() \"%s\" failed (%d: %s)\n", conf, errno, strerror(errno));
        return 1;
    }
    char word[512] = "";
    if (fscanf(f, "%511s", word) != 1) word[0] = 0;
    fclose(f);
    fprintf(stderr, "nginx: [emerg] unknown directive \"%s\" in %s:1\n", word, conf);
    return 1;
}

int main(int argc, char **argv) {
    const char *conf = "/etc/nginx/nginx.conf";
    int asked = 0, dumping = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "-T")) asked = 1;
        if (!strcmp(argv[i], "-T")) dumping = 1;
        if (!strcmp(argv[i], "-c") && i + 1 < argc) conf = argv[i + 1];
    }
    if (asked) {
        record();
        if (dumping) return dump(conf);
        fprintf(stderr, "nginx version: nginx/1.22.1\nconfigure arguments: --prefix=/usr/share/nginx\n");
        return 0;
    }
    const char *port = getenv("LISTEN_PORT");
    int s = socket(AF_INET, SOCK_STREAM, 0), yes = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port ? atoi(port) : 0),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 64)) return 2;
    const char answer[] = "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        char buf[4096];
        ssize_t got = read(c, buf, sizeof buf);
        (void)got;
        if (write(c, answer, sizeof answer - 1) < 0) { /* the client left */ }
        close(c);
    }
}
