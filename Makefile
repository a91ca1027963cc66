# keel — one build for the library, the binary, tests, benchmarks and fuzzers.
#
#   make                      build build/keel and build/libkeel.a
#   make test                 unit tests (Check), replay fixtures, black-box tests
#   make SANITIZE=address,undefined test-unit
#                             the same unit tests under sanitizers (in build/san)
#   make bench [BENCH=policy] benchmarks, one JSON object per line
#   make fuzz [FUZZ_SECONDS=60]  libFuzzer targets under ASan+UBSan (clang)
#   make run [LISTEN=127.0.0.1:8080]  build and run keel's main job: the server
#                             with its web page (keel serve, loopback, no keys)
#   make chat [PACK=payer]    a conversation in the terminal (keel chat)
#
# Dependencies come from pkg-config only; scripts/install-deps installs them.
# The one exception is hnswlib (libhnswlib-dev, header-only C++, no .pc):
# src/memory/hnsw.cc wraps it for C and is compiled with $(CXX).

# Builds run on every core unless -j is given; the test recipe's steps
# still run one after the other.
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc)
endif

PKGS      := jansson yaml-0.1 sqlite3 libcurl libevent libevent_pthreads libcrypto
CC        ?= cc
CXX       ?= g++
CFLAGS    ?= -O2 -g
SANITIZE  ?=
BENCH     ?=
FUZZ_SECONDS ?= 60

BUILD     ?= build
ifneq ($(SANITIZE),)
O         := $(BUILD)/san
SANFLAGS  := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
# hnswlib 0.6.2's SSE prefetches read the link after a full list, up to 3
# bytes past its malloc request (within glibc's chunk); ASan would stop at
# that, so sanitized builds use its plain loops (src/memory/hnsw.cc).
HNSW_SANDEFS := -DNO_MANUAL_VECTORIZATION
else
O         := $(BUILD)
SANFLAGS  :=
endif

WARNINGS  := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wwrite-strings -Wformat=2 -Wvla -Wpointer-arith -Wundef
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARNINGS) $(CFLAGS) $(SANFLAGS) -Isrc $(PKG_CFLAGS) -MMD -MP
ALL_CXXFLAGS := -std=c++17 -D_GNU_SOURCE -Wall -Wextra -Werror $(CFLAGS) $(SANFLAGS) $(HNSW_SANDEFS) \
                -Isrc -MMD -MP
ALL_LDFLAGS := $(SANFLAGS) $(LDFLAGS)
LIBS      := $(PKG_LIBS) -lstdc++ -lpthread -lm

LIB_SRC   := $(sort $(wildcard src/core/*.c src/pack/*.c src/text/*.c src/policy/*.c src/replay/*.c \
                               src/store/*.c src/ingest/*.c src/pipeline/*.c src/providers/*.c src/llm/*.c src/memory/*.c src/artifact/*.c \
                               src/server/*.c))
LIB_CXX_SRC := $(sort $(wildcard src/memory/*.cc))
CLI_SRC   := $(sort $(wildcard src/cli/*.c))
UNIT_SRC  := $(sort $(wildcard tests/unit/*.c) tests/fake/fake_http.c)
BENCH_SRC := $(sort $(wildcard bench/*.c))
FUZZ_SRC  := $(sort $(wildcard fuzz/fuzz_*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(O)/obj/%.o) $(LIB_CXX_SRC:%.cc=$(O)/obj/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(O)/obj/%.o)
UNIT_OBJ  := $(UNIT_SRC:%.c=$(O)/obj/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(O)/obj/%.o)

LIBKEEL   := $(O)/libkeel.a
KEEL      := $(O)/keel
UNIT      := $(O)/keel-unit
BENCHBIN  := $(O)/keel-bench
FAKEHTTP  := $(O)/keel-fake-http
FAKEOPENAI := $(O)/keel-fake-openai

.PHONY: all test test-unit test-replay test-blackbox bench fuzz fuzz-build run chat clean

all: $(KEEL)

$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(O)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -c $< -o $@

$(LIBKEEL): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(KEEL): $(CLI_OBJ) $(LIBKEEL)
	$(CC) $(ALL_LDFLAGS) -o $@ $(CLI_OBJ) $(LIBKEEL) $(LIBS)

# The unit tests also link the fake HTTP server of tests/fake (libevent).
$(O)/obj/tests/unit/%.o: ALL_CFLAGS += $(shell pkg-config --cflags check)
$(UNIT): $(UNIT_OBJ) $(LIBKEEL)
	$(CC) $(ALL_LDFLAGS) -o $@ $(UNIT_OBJ) $(LIBKEEL) $(shell pkg-config --libs check) $(LIBS)

# The scripted HTTP server of the black-box tests (never part of keel).
$(FAKEHTTP): $(O)/obj/tests/fake/fake_http_main.o $(O)/obj/tests/fake/fake_http.o $(LIBKEEL)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# The scripted OpenAI-compatible model server of the black-box tests.
$(FAKEOPENAI): $(O)/obj/tests/fake/fake_openai_main.o
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BENCHBIN): $(BENCH_OBJ) $(LIBKEEL)
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_OBJ) $(LIBKEEL) $(LIBS)

# The whole suite, in this order even under -j: unit tests, replay
# fixtures, then black-box tests of the real binary. Each prints its own
# closing line; any failure stops make.
test: $(UNIT) $(KEEL) $(FAKEHTTP) $(FAKEOPENAI)
	KEEL_ROOT=$(CURDIR) $(UNIT)
	$(KEEL) replay tests/replay
	KEEL=$(abspath $(KEEL)) FAKE_HTTP=$(abspath $(FAKEHTTP)) FAKE_OPENAI=$(abspath $(FAKEOPENAI)) \
	    sh tests/blackbox/run.sh

test-unit: $(UNIT)
	KEEL_ROOT=$(CURDIR) $(UNIT)

test-replay: $(KEEL)
	$(KEEL) replay tests/replay

test-blackbox: $(KEEL) $(FAKEHTTP) $(FAKEOPENAI)
	KEEL=$(abspath $(KEEL)) FAKE_HTTP=$(abspath $(FAKEHTTP)) FAKE_OPENAI=$(abspath $(FAKEOPENAI)) \
	    sh tests/blackbox/run.sh

bench: $(BENCHBIN)
	KEEL_ROOT=$(CURDIR) $(BENCHBIN) $(BENCH)

# libFuzzer needs clang; the fuzz build has its own object tree. The
# library is compiled once with the fuzzer's coverage instrumentation but
# without its main (fuzzer-no-link); each target links those objects.
FUZZ_CC     ?= clang
FUZZ_CXX    ?= clang++
FUZZ_O      := $(BUILD)/fuzz
FUZZ_SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Isrc $(PKG_CFLAGS) -MMD -MP \
               -fsanitize=fuzzer-no-link $(FUZZ_SANFLAGS)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_O)/obj/%.o) $(LIB_CXX_SRC:%.cc=$(FUZZ_O)/obj/%.o)
FUZZ_MAIN_OBJ := $(FUZZ_SRC:fuzz/%.c=$(FUZZ_O)/obj/fuzz/%.o)
FUZZ_BINS   := $(FUZZ_SRC:fuzz/%.c=$(FUZZ_O)/%)
.SECONDARY: $(FUZZ_MAIN_OBJ) $(FUZZ_LIB_OBJ)

$(FUZZ_O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

# The C++ wrapper is built under the sanitizers but without the fuzzer's
# instrumentation of hnswlib (no target reaches it); the link takes
# UBSan's C++ runtime, which the C driver leaves out by default.
$(FUZZ_O)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) -std=c++17 -D_GNU_SOURCE -DNO_MANUAL_VECTORIZATION -g -O1 -Isrc -MMD -MP \
	    $(FUZZ_SANFLAGS) -c $< -o $@

$(FUZZ_O)/%: $(FUZZ_O)/obj/fuzz/%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SANFLAGS) -fsanitize-link-c++-runtime -o $@ $^ $(LIBS)

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	KEEL_ROOT=$(CURDIR) FUZZ_SECONDS=$(FUZZ_SECONDS) sh fuzz/run.sh $(FUZZ_BINS)

# keel's main job is the server with its web page; `make chat` is the
# same in the terminal (PACK=payer shows clarification and the policy corpus).
PACK      ?= scholar
LISTEN    ?= 127.0.0.1:8080
run: $(KEEL)
	$(KEEL) serve --auth none --listen $(LISTEN)

chat: $(KEEL)
	$(KEEL) chat --pack $(PACK)

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(UNIT_OBJ:.o=.d) $(BENCH_OBJ:.o=.d) \
         $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_MAIN_OBJ:.o=.d)
