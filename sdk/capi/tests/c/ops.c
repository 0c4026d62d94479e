/* Builds two CISC ops through csd_cisc.h and prints each page in hex, one line per op;
 * then checks that a bad op is refused with a reason. The Rust test builds the same ops
 * with csd_sdk::cisc and compares the pages. */
#include <stdio.h>
#include <string.h>
#include "csd_cisc.h"

static int print_page(csd_cisc *op) {
    uint8_t page[CSD_CISC_PAGE_BYTES];
    if (csd_cisc_encode(op, page) != CSD_CISC_PAGE_BYTES) {
        fprintf(stderr, "encode failed: %s\n", csd_cisc_error(op));
        return 1;
    }
    for (size_t i = 0; i < sizeof page; i++) printf("%02x", page[i]);
    printf("\n");
    return 0;
}

int main(void) {
    /* append-CRC-write on descriptor 3, under MicroTx. */
    const uint8_t record[] = "a log record";
    csd_cisc *op = csd_cisc_new();
    csd_cisc_grain(op, 1);
    int data = csd_cisc_input(op, record, sizeof record - 1);
    csd_file log = {CSD_FD, 3};
    csd_cisc_append(op, log, data);
    int crc = csd_cisc_process(op, "crc32", &data, 1);
    csd_cisc_append(op, log, crc);
    if (print_page(op)) return 1;
    size_t len = 0;
    const uint8_t *buf = csd_cisc_input_data(op, 0, &len);
    if (csd_cisc_input_count(op) != 1 || len != sizeof record - 1 || memcmp(buf, record, len)) {
        fprintf(stderr, "the host buffer is not the record\n");
        return 1;
    }
    csd_cisc_free(op);

    /* A pipeline: read, compress on the device, write a new file, rename it into place. */
    op = csd_cisc_new();
    csd_file src, out;
    csd_cisc_open(op, "/db/000007.sst", 0, &src);
    int block = csd_cisc_pread(op, src, 0, 65536);
    int packed = csd_cisc_process(op, "compress", &block, 1);
    csd_cisc_open(op, "/db/000007.tmp", 1, &out);
    csd_cisc_truncate(op, out, 0);
    csd_cisc_write(op, out, packed);
    csd_cisc_fsync(op, out);
    csd_cisc_close(op, out);
    csd_cisc_close(op, src);
    csd_cisc_rename(op, "/db/000007.tmp", "/db/000007.lz4");
    csd_cisc_return(op, packed);
    if (print_page(op)) return 1;
    csd_cisc_free(op);

    /* Refused: a slot written by nothing, an unknown stage, a null builder. */
    op = csd_cisc_new();
    csd_cisc_append(op, log, 5);
    uint8_t page[CSD_CISC_PAGE_BYTES];
    if (csd_cisc_encode(op, page) >= 0 || !strstr(csd_cisc_error(op), "slot 5")) {
        fprintf(stderr, "an unset slot was not refused: %s\n", csd_cisc_error(op));
        return 1;
    }
    if (csd_cisc_process(op, "bogus", &data, 1) >= 0 || !strstr(csd_cisc_error(op), "bogus")) {
        fprintf(stderr, "an unknown stage was not refused\n");
        return 1;
    }
    if (csd_cisc_input(NULL, record, 1) >= 0 || csd_cisc_encode(NULL, page) >= 0) {
        fprintf(stderr, "a null builder was not refused\n");
        return 1;
    }
    csd_cisc_free(op);
    csd_cisc_free(NULL);
    return 0;
}
