// Loads one variant of capture_cost.bpf.c on the scheduler's tracepoints,
// for a cgroup, until SIGINT/SIGTERM; drains the ring buffer every 50 ms
// (variant `ring`); then prints one line: events seen, kept, records read,
// records lost (ring buffer full), its own CPU time, and the longest time
// between two of its reads.
//
//   bpf_cost OBJECT VARIANT CGROUP_DIR
//
// VARIANT: empty, filter, ring or agg. CGROUP_DIR: a v1 cpu cgroup
// (/sys/fs/cgroup/cpu/...) or a v2 one; its inode is the kernfs id the
// programs compare with.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define CGROUP2_SUPER_MAGIC 0x63677270
#define CPU_CGRP_ID 1

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static unsigned long long records;
static int on_record(void *ctx, void *data, size_t size)
{
	(void)ctx; (void)data; (void)size;
	records++;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bpf_cost OBJECT VARIANT CGROUP_DIR\n");
		return 2;
	}
	const char *variant = argv[2];
	struct stat st;
	struct statfs sf;
	if (stat(argv[3], &st) || statfs(argv[3], &sf)) {
		perror(argv[3]);
		return 2;
	}
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 2;
	}
	struct bpf_program *prog;
	size_t len = strlen(variant);
	bpf_object__for_each_program(prog, obj) {
		const char *name = bpf_program__name(prog);
		bpf_program__set_autoload(prog, strncmp(name, variant, len) == 0 && name[len] == '_');
	}
	// The read-only globals (.rodata): the target cgroup and its hierarchy.
	struct bpf_map *map, *rodata = NULL;
	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);
		if (strlen(name) >= 7 && strcmp(name + strlen(name) - 7, ".rodata") == 0)
			rodata = map;
	}
	size_t rosize;
	struct { unsigned long long target_cgid; int subsys; } *ro = rodata ? (void *)bpf_map__initial_value(rodata, &rosize) : NULL;
	if (!ro || rosize < sizeof(ro->target_cgid) + sizeof(ro->subsys)) {
		fprintf(stderr, "no .rodata to set\n");
		return 2;
	}
	ro->target_cgid = (unsigned long long)st.st_ino;
	ro->subsys = sf.f_type == CGROUP2_SUPER_MAGIC ? -1 : CPU_CGRP_ID;
	if (bpf_object__load(obj)) {
		fprintf(stderr, "cannot load %s\n", argv[1]);
		return 2;
	}
	int attached = 0;
	bpf_object__for_each_program(prog, obj) {
		if (!bpf_program__autoload(prog))
			continue;
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "cannot attach %s\n", bpf_program__name(prog));
			return 2;
		}
		attached++;
	}
	struct ring_buffer *ring = ring_buffer__new(bpf_map__fd(bpf_object__find_map_by_name(obj, "rb")), on_record, NULL, NULL);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "bpf_cost: %s: %d programs attached\n", variant, attached);
	// The longest time between two reads: a reader kept off its CPU
	// longer than the ring buffer holds loses records.
	double max_gap_ms = 0, last = 0;
	while (!stop) {
		struct timespec t = {0, 50 * 1000 * 1000}, now;
		nanosleep(&t, NULL);
		ring_buffer__consume(ring);
		clock_gettime(CLOCK_MONOTONIC, &now);
		double ms = now.tv_sec * 1e3 + now.tv_nsec / 1e6;
		if (last && ms - last > max_gap_ms)
			max_gap_ms = ms - last;
		last = ms;
	}
	ring_buffer__consume(ring);
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "counts"));
	int ncpu = libbpf_num_possible_cpus();
	unsigned long long sum[3] = {0}, *v = calloc(ncpu, sizeof(*v));
	for (unsigned k = 0; k < 3; k++) {
		if (bpf_map_lookup_elem(fd, &k, v) == 0)
			for (int c = 0; c < ncpu; c++)
				sum[k] += v[c];
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("seen %llu kept %llu read %llu lost %llu cpu_s %.2f %.2f max_gap_ms %.0f\n", sum[0], sum[1], records, sum[2],
	       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, max_gap_ms);
	return 0;
}
