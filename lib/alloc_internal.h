/* alloc_internal.h — how libgimg allocates large buffers. */
#ifndef GIMG_ALLOC_INTERNAL_H
#define GIMG_ALLOC_INTERNAL_H

#include <stddef.h>

/* malloc() for pixel data and whole files: blocks of 2 MiB and more are
 * 2 MiB aligned and backed by transparent huge pages, because first-touch
 * page faults cost more than the data's copy itself (48 MB: about 31 ms
 * with 4 KiB pages, 6 ms with huge pages, 6 ms for a memcpy). Release with
 * free(); NULL when out of memory. */
void *gimg_alloc_large(size_t bytes);

#endif
