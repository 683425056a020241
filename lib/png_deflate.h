/*
 * png_deflate.h — the zlib stream of a PNG's filtered rows (codec_png.c
 * writes the file around it), coded by png_deflate.c: our Huffman coder,
 * or zlib's LZ where it may win, in segments of PNG_SEGMENT_BYTES coded
 * on their own. A block's codes and header are planned apart from its
 * symbols (png_plan_block), so that another coder of the same stream (a
 * GPU's, which counts and writes the symbols there) can make the same
 * bytes. Not installed.
 */
#ifndef GIMG_PNG_DEFLATE_H
#define GIMG_PNG_DEFLATE_H

#include <stddef.h>
#include <stdint.h>

/* A block of the Huffman coder: this many filtered bytes (the last of a
 * segment may be shorter), with its own codes. */
#define PNG_BLOCK_BYTES ((size_t)1 << 18)
/* The coder's only matches: runs (distance 1) of PNG_MIN_RUN to
 * PNG_MAX_RUN bytes equal to the byte before them, taken greedily from the
 * left within a block (the byte before a block's first may be the
 * previous block's, or segment's, last). */
#define PNG_MIN_RUN 8
#define PNG_MAX_RUN 258
/* Segments: coded independently (in parallel), each ending on a byte
 * boundary but the last. */
#define PNG_SEGMENT_BYTES (8 * PNG_BLOCK_BYTES)   /* 2 MiB */
/* DEFLATE's literal/length alphabet (286 symbols: 256 bytes, end of
 * block, 29 lengths). */
#define PNG_LITLEN 286
/* The longest dynamic block header: 3 + 5 + 5 + 4 bits, 19 3-bit code
 * length code lengths, and at most 287 code length symbols of at most
 * 7 + 7 bits. */
#define PNG_HEAD_MAX_BYTES 520

/* One segment's stream. */
typedef struct {
    unsigned char *p;   /* malloc'd */
    size_t len;
} png_coded;

/* Codes seg[0, n) (n <= PNG_SEGMENT_BYTES; seg[-1], the byte before it,
 * is readable unless `first`: a run may go on from it) as one segment
 * into *out: stored at level 0; else the Huffman coder's stream, or
 * zlib's LZ stream where it races and is smaller. The last segment
 * (`last`) ends with a final block, the others with an empty stored block.
 * 0 when memory ran out. */
int png_code_segment(const unsigned char *seg, size_t n, int first, int last, int level,
                     png_coded *out);

/* How a block of n bytes whose symbol counts are freq (freq[256], the end
 * of block, 1) is coded when it starts `at` bits (0..7) past a byte
 * boundary: stored, or with the codes and header below. */
typedef struct {
    int stored;               /* 1: stored (not smaller coded) */
    uint64_t bits;            /* the block's bits from `at`: header, symbols, end code */
    unsigned char len[PNG_LITLEN];    /* literal/length code lengths */
    uint16_t code[PNG_LITLEN];        /* their codes, bit-reversed (first bit lowest) */
    unsigned head_bits;       /* the header: BFINAL, BTYPE 2, the code tables */
    unsigned char head[PNG_HEAD_MAX_BYTES];   /* first bit lowest */
} png_block_plan;
void png_plan_block(const uint32_t *freq, size_t n, int final, unsigned at,
                    png_block_plan *plan);

#endif
