// sam2.h must compile on its own as C++17 (-Wall -Wextra -Wpedantic -Werror), and its functions
// must link with C linkage (the extern "C" block): this program calls a few of them.
#include "sam2.h"

static_assert(sizeof(sam2_status) == 4, "sam2_status is 32 bits");
static_assert(SAM2_OK == 0 && SAM2_ERR_PANIC == 12, "status values are fixed");

int main() {
    sam2_prompt prompt{};
    sam2_point point{1.0f, 2.0f, SAM2_POINT_POSITIVE};
    prompt.points = &point;
    prompt.point_count = 1;
    sam2_predict_options options{};
    if (sam2_predict_options_init(&options, sizeof options) != SAM2_OK) return 1;
    if (options.struct_size != sizeof(sam2_predict_options)) return 1;
    if (sam2_version() == nullptr || sam2_status_str(SAM2_ERR_MODEL) == nullptr) return 1;
    sam2_predictor_free(nullptr);
    return prompt.has_box;
}
