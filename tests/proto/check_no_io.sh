#!/usr/bin/env bash
# The engine in proto/ is sans-I/O: it never reads a clock, opens or uses a
# socket or file, allocates from the global heap or draws global randomness.
# Two checks: the sources (calls spelled out) and the compiled library (symbols
# it imports, which also catches calls hidden behind macros).
# usage: check_no_io.sh PROTO_SRC_DIR LIBMRP_A
set -u
src=${1:?source dir}
lib=${2:?static library}
fail=0

forbidden='clock_gettime|gettimeofday|time|clock|nanosleep|usleep|sleep|socket|bind|connect|accept|listen|send|sendto|sendmsg|sendmmsg|recv|recvfrom|recvmsg|recvmmsg|open|openat|fopen|read|write|close|ioctl|mmap|malloc|calloc|realloc|free|reallocarray|strdup|strndup|aligned_alloc|posix_memalign|rand|random|srand|srandom|rand_r|drand48|lrand48|arc4random|getrandom|getentropy|printf|fprintf|puts|perror|abort|exit|getenv'

# 1. Sources: a forbidden name called as a function (not a member such as
#    alloc->free(), which is the injected allocator). Whole-line comments are
#    skipped; rephrase an inline comment rather than weaken this.
hits=$(grep -nE "(^|[^>.[:alnum:]_])($forbidden)[[:space:]]*\(" "$src"/*.c "$src"/*.h 2>/dev/null |
	grep -vE '^\S+:[0-9]+:\s*(\*|/\*|//)' || true)
if [ -n "$hits" ]; then
	echo "proto/ sources call forbidden functions:"
	echo "$hits"
	fail=1
fi

# 2. Symbols: everything the library leaves undefined must be on the allow list.
if ! command -v nm >/dev/null; then
	echo "nm not found: cannot check imported symbols" >&2
	exit 77
fi
allowed='^(memcpy|memmove|memset|memcmp|strlen|strcmp|strncmp|__stack_chk_fail|__assert_fail|__ubsan_.*|__asan_.*|__sanitizer_.*|__sancov_.*|_GLOBAL_OFFSET_TABLE_|__tsan_.*|__msan_.*|__gcov_.*|__llvm_.*|mrp_.*)$'
undef=$(nm -u --format=posix "$lib" | awk '$2 == "U" {print $1}' | sed 's/@.*//' | sort -u)
bad=$(echo "$undef" | grep -vE "$allowed" | grep -v '^$' || true)
if [ -n "$bad" ]; then
	echo "proto/ library imports symbols outside the allow list:"
	echo "$bad"
	fail=1
fi

n=$(echo "$undef" | grep -c . || true)
if [ $fail -eq 0 ]; then
	echo "no-io: sources clean, $n imported symbols all allowed"
fi
exit $fail
