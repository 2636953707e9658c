// A threaded workload for scripts/eventpid_check.sh: a spinning thread and
// two threads ping-ponging through pipes, for argv[1] seconds.
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
static int p[2][2];
static void *spin(void *a) { volatile unsigned long x = 0; for (;;) x++; return a; }
static void *ping(void *a) { long i = (long)a; char c = 0; for (;;) { if (i) { write(p[0][1], &c, 1); read(p[1][0], &c, 1); } else { read(p[0][0], &c, 1); write(p[1][1], &c, 1); } } return a; }
int main(int argc, char **argv) {
  pipe(p[0]); pipe(p[1]);
  pthread_t t;
  pthread_create(&t, 0, spin, 0);
  pthread_create(&t, 0, ping, (void *)0);
  pthread_create(&t, 0, ping, (void *)1);
  sleep(atoi(argv[1]));
  return 0;
}
