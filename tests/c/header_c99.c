/* sam2.h must compile on its own as C99 (-std=c99 -Wall -Wextra -Wpedantic -Werror): nothing is
 * included before it. Running the program checks a few things every C host relies on. */
#include "sam2.h"

int main(void) {
    /* The status type is a fixed-width integer in C before C23. */
    typedef char status_is_32_bits[sizeof(sam2_status) == 4 ? 1 : -1];
    status_is_32_bits unused;
    (void)unused;
    sam2_status status = SAM2_OK;
    struct sam2_prompt prompt = {0};
    sam2_point point = {1.0f, 2.0f, SAM2_POINT_POSITIVE};
    prompt.points = &point;
    prompt.point_count = 1;
    if (status != 0 || SAM2_ERR_PANIC != 12 || prompt.has_box != 0) return 1;
    /* The functions link from C. */
    if (sam2_version() == 0 || sam2_status_str(SAM2_ERR_MODEL) == 0) return 1;
    return 0;
}
