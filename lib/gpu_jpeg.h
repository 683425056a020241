/*
 * gpu_jpeg.h — the GPU codecs: JPEG decoded and encoded on a GPU with
 * nvJPEG (loaded at run time: nvjpeg_api.h), for a batch whose device is
 * a GPU. The CPU workers still read and write the files; only bitstreams
 * cross PCIe:
 *
 *   load (CPU worker)  read the file; gimg_jpeg_read_header: layout and
 *                      metadata, and whether the GPU's decoders take it
 *   compute (lane)     decode into the lane's GPU (the image's `device`),
 *                      the operation's kernels read it there and leave
 *                      their output there (gimg_gpu_keep_outputs), which
 *                      nvJPEG encodes; the bitstream comes back
 *   store (CPU worker) the headers and metadata put on the bitstream
 *                      (gimg_jpeg_with_headers), the file written
 *
 * Decoding uses the GPU's hardware JPEG decoder (A100, H100, H200: nvJPEG's
 * hardware backend) where the card has one, else nvJPEG's default GPU
 * backend. A file neither takes (progressive, CMYK, 12-bit, other
 * sampling: gimg_jpeg_facts), or that nvJPEG fails on, is decoded by
 * libjpeg-turbo instead, so a batch never fails for them. Results differ
 * from libjpeg-turbo's only by the decoders' and encoders' rounding (IDCT,
 * chroma upsampling): gimg(7) states the bound the tests hold.
 *
 * Ownership: a gimg_gpu owns its gimg_gpu_jpeg (lane 0 of a GPU owns the
 * nvJPEG handle its other lanes share). Built only with CUDA.
 */
#ifndef GIMG_GPU_JPEG_H
#define GIMG_GPU_JPEG_H

#include "gpu_internal.h"

#ifdef GIMG_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif

/* nvJPEG on the lanes of one GPU: a handle (hardware backend where the
 * card has one) shared by them, and each lane's decoder and encoder
 * states, made on first use. The slow part (0.6 s on an H100): run on the
 * thread that starts CUDA. Fails (GIMG_E_DEVICE, with why for -v) where
 * libnvjpeg is missing or cannot start; the lanes then use the CPU codecs. */
gimg_status gimg_gpu_jpeg_open(gimg_gpu *const *lanes, int n_lanes);
void gimg_gpu_jpeg_close(gimg_gpu *g);
/* The pinned memory g's codec holds (its bitstreams', and where g is its
 * GPU's lane 0, nvJPEG's). */
size_t gimg_gpu_jpeg_pinned_bytes(const gimg_gpu *g);
/* 1 once gimg_gpu_jpeg_open succeeded for g; *hardware: the hardware
 * decoder serves it, in *calls calls so far for *images images (its GPU's
 * lanes together; read once the lanes are idle). */
int gimg_gpu_jpeg_ready(const gimg_gpu *g, int *hardware, int *calls, int *images);

/* Decodes the JPEG bits[0 .. len-1], which gimg_jpeg_read_header found
 * taken by the GPU, into the lane's decoded-input buffer
 * (GIMG_GPU_SLOT_DECODED): *d is width x height x channels (1 or 3) 8-bit,
 * ready on g's stream. alone: no other image of the job is in flight, so
 * that a large one may be cut in strips (gpu_jpeg.c). GIMG_E_FORMAT when
 * nvJPEG refuses the file (the caller decodes it on the CPU). */
gimg_status gimg_gpu_jpeg_decode(gimg_gpu *g, const unsigned char *bits, size_t len, int width,
                                 int height, int channels, int alone, gimg_dimage *d);

/* Images of this many pixels or more are decoded in strips where their
 * restart markers allow it (gpu_jpeg.c says when); UINT64_MAX: never; 0:
 * the default again. For tests and benchmarks, between decodings. */
void gimg_gpu_jpeg_set_strip_min_pixels(uint64_t pixels);

/* Encodes d (8-bit gray or RGB) at quality 1-100 with chroma subsampling
 * subsampling (GIMG_NVJPEG_CSS_*: 4:4:4, 4:2:2 or 4:2:0; gray ignores
 * it), Huffman tables optimised as the CPU encoder's: *bits (malloc'd,
 * the caller frees) is a JPEG file without metadata. */
gimg_status gimg_gpu_jpeg_encode(gimg_gpu *g, const gimg_dimage *d, int quality, int subsampling,
                                 unsigned char **bits, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
#endif
