/* csd_cisc.h: build FusionFS CISC ops from C.
 *
 * The same builder as the Rust SDK (csd_sdk::cisc, the ABI reference): commands pass data
 * along numbered slots, files are descriptors the tenant opened earlier or handles an
 * `open` of the op returns, and `csd_cisc_encode` lays the op out in the 4 KiB
 * extended-NVMe page the device decodes (its host buffers travel as their own DMA).
 *
 * Link with libcsd_sdk_capi.a (cargo build -p csd-sdk-capi) and -lpthread -ldl -lm.
 *
 *     csd_cisc *op = csd_cisc_new();
 *     int data = csd_cisc_input(op, record, len);
 *     csd_file log = { CSD_FD, 3 };
 *     csd_cisc_append(op, log, data);
 *     int crc = csd_cisc_process(op, "crc32", &data, 1);
 *     csd_cisc_append(op, log, crc);
 *     uint8_t page[CSD_CISC_PAGE_BYTES];
 *     if (csd_cisc_encode(op, page) < 0) fprintf(stderr, "%s\n", csd_cisc_error(op));
 *     csd_cisc_free(op);
 *
 * Every function returns a negative number on failure (a null builder, a null or non-UTF-8
 * string, an op that does not validate) and keeps the reason for csd_cisc_error. Slot and
 * handle numbers are handed out in order, as in Rust; an op that uses more than the page
 * allows is refused when it is encoded, naming the command.
 */
#ifndef CSD_CISC_H
#define CSD_CISC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CSD_CISC_PAGE_BYTES 4096
#define CSD_CISC_MAX_COMMANDS 32

/* A file a command works on: a descriptor (CSD_FD) or a handle of this op (CSD_HANDLE). */
enum { CSD_FD = 1, CSD_HANDLE = 2 };
typedef struct {
    uint32_t kind;
    uint32_t id;
} csd_file;

typedef struct csd_cisc csd_cisc;

csd_cisc *csd_cisc_new(void);
void csd_cisc_free(csd_cisc *op);
/* MacroTx (0, the default) or MicroTx (1). */
int csd_cisc_grain(csd_cisc *op, int micro);

/* Each returns the slot it fills. */
int csd_cisc_input(csd_cisc *op, const uint8_t *data, size_t len);
int csd_cisc_read(csd_cisc *op, csd_file file, uint32_t len);
int csd_cisc_pread(csd_cisc *op, csd_file file, uint64_t offset, uint32_t len);
/* A stage: a built-in name (crc32, compress, decompress, search, sort, xor, multiply) or
 * "task:export"; over 1 or 2 input slots. */
int csd_cisc_process(csd_cisc *op, const char *stage, const int *inputs, size_t n_inputs);

/* Opens `path` (creating it if `create`); the handle goes to *file. */
int csd_cisc_open(csd_cisc *op, const char *path, int create, csd_file *file);
int csd_cisc_write(csd_cisc *op, csd_file file, int slot);
int csd_cisc_pwrite(csd_cisc *op, csd_file file, uint64_t offset, int slot);
int csd_cisc_append(csd_cisc *op, csd_file file, int slot);
int csd_cisc_fsync(csd_cisc *op, csd_file file);
int csd_cisc_close(csd_cisc *op, csd_file file);
int csd_cisc_truncate(csd_cisc *op, csd_file file, uint64_t len);
int csd_cisc_unlink(csd_cisc *op, const char *path);
int csd_cisc_rename(csd_cisc *op, const char *from, const char *to);
/* Gives the file at `from` the further name `to` (a hard link). */
int csd_cisc_link(csd_cisc *op, const char *from, const char *to);
/* Makes `path` a symbolic link holding `target` (not followed by StorageFS). */
int csd_cisc_symlink(csd_cisc *op, const char *target, const char *path);
/* Returns a slot to the host when the op completes. */
int csd_cisc_return(csd_cisc *op, int slot);

/* Validates the op and writes its page (CSD_CISC_PAGE_BYTES bytes) to `page`; returns the
 * page's size, or a negative number with the reason in csd_cisc_error. */
long csd_cisc_encode(csd_cisc *op, uint8_t *page);
/* The host buffers of the op as last encoded, in order (their bytes go with the page). */
size_t csd_cisc_input_count(const csd_cisc *op);
const uint8_t *csd_cisc_input_data(const csd_cisc *op, size_t i, size_t *len);

/* The last failure's reason, or "" (valid until the next call on `op`). */
const char *csd_cisc_error(const csd_cisc *op);

#ifdef __cplusplus
}
#endif
#endif
