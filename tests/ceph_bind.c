/* A tiny LD_PRELOAD library for the Ceph tests: every outgoing IPv4 TCP
 * connection of the process starts from the address in
 * RECOVERY_TEST_BIND_ADDRESS (such as 127.0.0.10), so that one machine's
 * loopback holds several "hosts" as Ceph sees its clients.
 *
 * connect() binds a socket that is not bound yet to that address (port
 * 0: the kernel picks one), then calls the real connect(). Built by
 * tests/ceph.py (gcc -shared -fPIC ... -ldl) into its own directory. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static int unbound(int fd)
{
    struct sockaddr_in own;
    socklen_t size = sizeof(own);
    if (getsockname(fd, (struct sockaddr *)&own, &size) != 0)
        return 0;
    return own.sin_family == AF_INET && own.sin_port == 0
        && own.sin_addr.s_addr == htonl(INADDR_ANY);
}

int connect(int fd, const struct sockaddr *to, socklen_t size)
{
    static connect_fn real_connect;
    const char *address = getenv("RECOVERY_TEST_BIND_ADDRESS");
    if (!real_connect)
        real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    if (address && to && to->sa_family == AF_INET && unbound(fd)) {
        struct sockaddr_in from;
        memset(&from, 0, sizeof(from));
        from.sin_family = AF_INET;
        if (inet_pton(AF_INET, address, &from.sin_addr) == 1)
            bind(fd, (struct sockaddr *)&from, sizeof(from));
    }
    return real_connect(fd, to, size);
}
