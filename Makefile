# gimg — small, fast image tools in C and CUDA.
#
#   make            libgimg and the tools (with CUDA when nvcc is found)
#   make test       the CPU test suite (what CI runs)
#   make test-gpu   the suite on the GPU, GPU == CPU differential tests and
#                   compute-sanitizer runs (needs a CUDA GPU; exit 77 without);
#                   TEST_GPU_PARTS="diff san cli auto" picks parts, TEST_GPU_DIFF=
#                   "gpudiff_ssim ..." picks programs, TEST_GPU_CLI=
#                   "cli_gconv.sh ..." picks CLI suites, TEST_GPU_TIMEOUT=900
#                   bounds each parallel job (seconds)
#   make bench      kernel benchmarks (needs a CUDA GPU)
#   make bench-batch  the batch pipeline: GPU, CPU and codecs alone
#   make bench-cpu  the codecs and the tools on the CPU against libvips
#   make fuzz       libFuzzer targets (clang); make fuzz-smoke runs each a while
#   make test-valgrind  the CLI suites under valgrind memcheck
#   make demo       installs what is missing, builds, runs every tool on samples
#   make install    PREFIX=/usr/local DESTDIR= (builds for every GPU
#                   architecture, CUDA_ARCH=all, unless CUDA_ARCH is given)
#
# Knobs: NVCC= (empty: CPU-only build), CUDA_ARCH= (GPU targets: auto, the
# default: this machine's GPUs, or with none sm_75 + PTX; all: sm_75 to
# sm_90, for packages; "80 90": those; native: nvcc's -arch=native),
# STB_INCLUDE=/usr/include/stb, DEFLATE_CFLAGS= DEFLATE_LIBS= (libdeflate
# elsewhere), CUDA_HOME=, CC=, CFLAGS=, SANITIZE=1, FUZZ_CC=clang,
# FUZZ_SECONDS=30 (per fuzz target), FUZZ_SMOKE=0 (make test without it).

# `make` alone builds the tools, whatever rule comes first below.
.DEFAULT_GOAL := all

NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME ?= $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)),/usr/local/cuda)
# GPU targets. A first build should be quick: nvcc takes about a minute and
# a half per architecture for each of conv.cu and histogram.cu (2 cores),
# so `auto` compiles only for the GPUs this machine has, or, with none
# visible, for the oldest architecture the kernels support (Turing, sm_75:
# conv.cu has its own path below sm_80, and clusters and programmatic
# launches are compiled only for sm_90) plus its PTX, which the driver
# compiles for any later card on first use (about two minutes on an H100,
# once: the driver caches it; the GPU == CPU tests pass that way). `all`
# is the five-architecture build that packages need, and what `make
# install` builds unless CUDA_ARCH is given (`make install CUDA_ARCH=auto`
# installs a build for this machine).
CUDA_ARCH_ALL := 75 80 86 89 90
CUDA_ARCH_OLDEST := 75
CUDA_ARCH ?= $(if $(filter install,$(MAKECMDGOALS)),all,auto)
STB_INCLUDE ?= /usr/include/stb
PREFIX ?= /usr/local
CC ?= cc

# One program per cmd/g*.c; each has man/<tool>.1.
TOOLS := $(sort $(patsubst cmd/%.c,%,$(wildcard cmd/g*.c)))
BIN ?= bin
BUILD ?= build

WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_GNU_SOURCE -pthread -fopenmp $(WARN) -Ilib -Ikernels -isystem $(STB_INCLUDE)
DEFLATE_CFLAGS ?=
DEFLATE_LIBS ?= -ldeflate -lz
# The codecs' libraries (lib/codec.h): libjpeg-turbo, libspng, libtiff,
# libwebp (with its demux and mux), giflib. IMAGE_CFLAGS/IMAGE_LIBS point elsewhere.
IMAGE_CFLAGS ?=
IMAGE_LIBS ?= -ljpeg -lspng -ltiff -lwebpmux -lwebpdemux -lwebp -lgif
CFLAGS += $(DEFLATE_CFLAGS) $(IMAGE_CFLAGS)
LDLIBS := $(IMAGE_LIBS) $(DEFLATE_LIBS) -lm -ldl -pthread -fopenmp

ifeq ($(SANITIZE),1)
  CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
  # stb_image_write's JPEG encoder left-shifts negative ints (well defined
  # on every compiler we build with, undefined in ISO C); exempt only that
  # check, only in the translation unit that compiles stb.
  $(BUILD)/lib/stb_impl.o: CFLAGS += -fno-sanitize=shift
endif

LIB_SRC := $(wildcard lib/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CU_SRC := $(wildcard kernels/*.cu)

ifneq ($(NVCC),)
  CFLAGS += -DGIMG_HAVE_CUDA -isystem $(CUDA_HOME)/include
  ifeq ($(strip $(CUDA_ARCH)),native)
    GENCODE := -arch=native
    BACKEND := CPU and CUDA ($(NVCC), -arch=native)
  else
    ifeq ($(strip $(CUDA_ARCH)),all)
      CUDA_ARCH_LIST := $(CUDA_ARCH_ALL)
      ARCH_NOTE := every architecture, CUDA_ARCH=all
    else ifneq ($(filter-out auto,$(strip $(CUDA_ARCH))),)
      CUDA_ARCH_LIST := $(CUDA_ARCH)
      ARCH_NOTE := CUDA_ARCH=$(CUDA_ARCH)
    else
      # The compute capabilities of the visible GPUs ("90", "80,90"), from
      # the program nvcc's -arch=native asks (CUDA 11.6 and later, beside
      # nvcc), else from nvidia-smi ("9.0"); both fail without a GPU.
      CUDA_GPU_ARCH := $(shell { "$$(dirname "$$(readlink -f "$$(command -v '$(NVCC)')")")/__nvcc_device_query" || \
                           nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d .; } 2>/dev/null | \
                         grep -xE '[0-9]+(,[0-9]+)*' | tr , '\n' | sort -nu)
      CUDA_ARCH_LIST := $(or $(CUDA_GPU_ARCH),$(CUDA_ARCH_OLDEST))
      ARCH_NOTE := $(if $(CUDA_GPU_ARCH),this machine's GPUs,no GPU here; CUDA_ARCH=all builds every architecture)
    endif
    # SASS for every listed architecture, PTX of the newest for later cards.
    GENCODE := $(foreach a,$(CUDA_ARCH_LIST),-gencode arch=compute_$(a),code=sm_$(a)) \
               -gencode arch=compute_$(lastword $(CUDA_ARCH_LIST)),code=compute_$(lastword $(CUDA_ARCH_LIST))
    BACKEND := CPU and CUDA ($(NVCC), $(patsubst %,sm_%,$(CUDA_ARCH_LIST)) + compute_$(lastword $(CUDA_ARCH_LIST)) PTX: $(ARCH_NOTE))
  endif
  NVCCFLAGS ?= -O3 -lineinfo
  NVCCFLAGS += -std=c++17 $(GENCODE) -DGIMG_HAVE_CUDA -Ilib -Ikernels -Xcompiler -Wall,-fPIC,-fopenmp
  CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/%.o)
  LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
else
  BACKEND := CPU only (nvcc not found)
  CU_OBJ :=
endif

# Objects depend on the configuration they were built with, so that switching
# between a CUDA and a CPU-only build (NVCC=) rebuilds them.
CONFIG := $(CC) $(CFLAGS) | $(NVCC) $(NVCCFLAGS) | $(LDLIBS)
$(BUILD)/config: FORCE | $(BUILD)/dirs
	@echo '$(CONFIG)' | cmp -s - $@ || echo '$(CONFIG)' > $@
FORCE:

.PHONY: bench-server all test test-gpu test-valgrind fuzz fuzz-smoke bench bench-batch bench-cpu tune demo install clean check-man FORCE
all: $(addprefix $(BIN)/,$(TOOLS)) $(BUILD)/libgimg.a
	@echo "gimg: built $(TOOLS) in $(BIN)/ — backend: $(BACKEND)"

$(BUILD)/%.o: %.c lib/gimg.h $(wildcard lib/*.h) $(wildcard kernels/*.h) $(wildcard tests/*.h) $(BUILD)/config | $(BUILD)/dirs
	$(CC) $(CFLAGS) -c $< -o $@

# Kernels include the library's public and internal headers (the structs
# they fill: stats_internal.h, ssim_internal.h), never the others.
$(BUILD)/kernels/%.o: kernels/%.cu kernels/%.h $(wildcard kernels/*.cuh) $(wildcard lib/gimg*.h) \
                      $(wildcard lib/*_internal.h) $(BUILD)/config | $(BUILD)/dirs
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/dirs:
	@mkdir -p $(BUILD)/lib $(BUILD)/kernels $(BUILD)/cmd $(BUILD)/tests/bench $(BIN)
	@touch $@

$(BUILD)/libgimg.a: $(LIB_OBJ) $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/%: $(BUILD)/cmd/%.o $(BUILD)/libgimg.a
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libgimg.a $(LDLIBS)

# ----------------------------------------------------------------- tests
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/unit_*.c)) $(BUILD)/tests/gen \
             $(BUILD)/tests/imgcmp $(BUILD)/tests/fuzz/make_corpus
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/libgimg.a tests/check.h
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libgimg.a $(LDLIBS)
# nvJPEG's own header, against which unit_nvjpeg checks lib/nvjpeg_api.h:
# found in CUDA builds (CUDA_HOME/include); elsewhere NVJPEG_CFLAGS="-I<the
# nvidia-nvjpeg wheel's include> -I<CUDA's runtime headers>". Without it
# that check is skipped.
NVJPEG_CFLAGS ?=
$(BUILD)/tests/unit_nvjpeg.o: CFLAGS += $(NVJPEG_CFLAGS)
$(BUILD)/tests/fuzz/%.o: CFLAGS += -Itests
$(BUILD)/tests/fuzz/make_corpus.o: | $(BUILD)/tests/fuzz
$(BUILD)/tests/fuzz:
	@mkdir -p $@

# The fuzz smoke runs first when clang is there (not again under SANITIZE=1:
# the fuzz targets are sanitized builds already).
FUZZ_CC ?= clang
FUZZ_SMOKE ?= $(if $(filter 1,$(SANITIZE)),0,$(if $(shell command -v $(FUZZ_CC) 2>/dev/null),1,0))
test: all $(TEST_BINS) $(if $(filter 1,$(FUZZ_SMOKE)),fuzz-smoke)
	@BUILD=$(BUILD) BIN=$(BIN) tests/run.sh

test-valgrind: all $(TEST_BINS)
	@BUILD=$(BUILD) BIN=$(BIN) tests/valgrind.sh

# One GPU == CPU differential test per operation: tests/gpudiff_<op>.c.
GPUDIFF_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/gpudiff_*.c))
test-gpu: all $(TEST_BINS) $(GPUDIFF_BINS)
	@BUILD=$(BUILD) BIN=$(BIN) tests/run-gpu.sh

# ---------------------------------------------------------------- fuzzing
# libFuzzer targets (tests/fuzz/fuzz_*.c) over libgimg's C sources, built
# again with clang, ASan and UBSan, CPU only, in $(FUZZ_BUILD); see
# tests/fuzz/fuzz.h. stb gets the same exemption as under SANITIZE=1.
FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_SECONDS ?= 30
FUZZ_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined -std=c11 -D_GNU_SOURCE -pthread -fopenmp $(WARN) \
               -Wno-pass-failed -Wno-unknown-warning-option \
               -Ilib -Ikernels -Itests -Itests/fuzz -isystem $(STB_INCLUDE) $(DEFLATE_CFLAGS) \
               $(IMAGE_CFLAGS)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard tests/fuzz/fuzz_*.c))
$(FUZZ_BUILD)/%.o: %.c $(wildcard lib/*.h) $(wildcard tests/*.h) $(wildcard tests/fuzz/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_BUILD)/lib/stb_impl.o: FUZZ_CFLAGS += -fno-sanitize=shift
$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(IMAGE_LIBS) $(DEFLATE_LIBS) -lm -ldl
$(FUZZ_BUILD)/make_corpus: $(FUZZ_BUILD)/tests/fuzz/make_corpus.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ $(IMAGE_LIBS) $(DEFLATE_LIBS) -lm -ldl
fuzz: $(FUZZ_TARGETS) $(FUZZ_BUILD)/make_corpus
fuzz-smoke: fuzz
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/smoke.sh

# ------------------------------------------------------------- benchmarks
NPP_LIBS := $(if $(wildcard $(CUDA_HOME)/include/nppi.h),-lnppif -lnppist -lnppidei -lnppc,)
NPP_FLAG := $(if $(NPP_LIBS),-DGIMG_HAVE_NPP,)
$(BUILD)/tests/bench/%: tests/bench/%.cu $(BUILD)/libgimg.a
	$(NVCC) $(NVCCFLAGS) $(NPP_FLAG) -Itests -o $@ $< $(BUILD)/libgimg.a $(filter -L%,$(LDFLAGS)) \
	    -L$(CUDA_HOME)/lib64 $(NPP_LIBS) $(IMAGE_LIBS) $(DEFLATE_LIBS) -lgomp

# One benchmark per kernel file: tests/bench/bench_<op>.cu.
BENCH_BINS := $(patsubst tests/bench/%.cu,$(BUILD)/tests/bench/%,$(wildcard tests/bench/bench_*.cu))
bench: all $(BENCH_BINS)
	@BUILD=$(BUILD) BIN=$(BIN) tests/bench/run.sh

# Many images in one process: the batch pipeline, GPU against CPU against
# the codecs alone (BATCH_IMAGES=2500 JPEGs of 1 MP, BATCH_LARGE=240 of
# 16 MP; the GPU part needs one).
bench-batch: all $(BUILD)/tests/gen
	@BUILD=$(BUILD) BIN=$(BIN) tests/bench/batch.sh

# Whole commands with gimgd warm against the CPU and the tool's own GPU
# context: one JPEG, a pipe of three tools, samples/Makefile (needs a GPU).
bench-server: all $(BUILD)/tests/gen
	@BUILD=$(BUILD) BIN=$(BIN) tests/bench/server.sh

# The CPU against libvips on this machine, whole commands: the codecs
# (cpu_codecs.sh) and each tool (cpu_g*.sh); needs vips, skipped without.
bench-cpu: all $(BUILD)/tests/gen $(BUILD)/tests/imgcmp
	@for b in tests/bench/cpu_*.sh; do echo "== $$b"; BUILD=$(BUILD) BIN=$(BIN) bash $$b || exit 1; done

# Times other tile shapes of the kernels (see tests/bench/tune_transpose.cu).
$(BUILD)/tests/bench/tune_transpose: kernels/transpose.cu
tune: all $(BUILD)/tests/bench/tune_transpose
	$(BUILD)/tests/bench/tune_transpose

# ------------------------------------------------------------------- demo
demo:
	@samples/demo.sh

# ----------------------------------------------------------------- install
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(addprefix $(BIN)/,$(TOOLS)) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libgimg.a $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(wildcard lib/gimg*.h) $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(addprefix man/,$(addsuffix .1,$(TOOLS))) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/gimg.7 $(DESTDIR)$(PREFIX)/share/man/man7/

check-man:
	mandoc -Tlint -Wwarning man/*.1 man/*.7

clean:
	rm -rf $(BIN) $(BUILD) samples/out

.SECONDARY:
