// A C++ host program built against an installed sam2 with CMake's find_package(sam2 CONFIG
// REQUIRED) and the imported target sam2::sam2 (see CMakeLists.txt here and
// tools/ci/test-packaging.sh). Same checks as consumer.c: the versions agree, ONNX Runtime is
// found by the library, and one click segments the red disc of testdata/shapes.ppm.
//
//   sam2_consumer_cpp ENCODER DECODER TESTDATA_DIR VERSION
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include <sam2.h>

#include "pnm.h"

namespace {

void check(sam2_status status, const char *what) {
    if (status == SAM2_OK) return;
    char message[4096] = "";
    sam2_last_error_message(message, sizeof message, nullptr);
    throw std::runtime_error(std::string(what) + ": " + message);
}

template <typename T, void (*Free)(T *)>
struct Deleter {
    void operator()(T *p) const { Free(p); }
};
using Encoder = std::unique_ptr<sam2_encoder, Deleter<sam2_encoder, sam2_encoder_free>>;
using Predictor = std::unique_ptr<sam2_predictor, Deleter<sam2_predictor, sam2_predictor_free>>;
using Embedding = std::unique_ptr<sam2_embedding, Deleter<sam2_embedding, sam2_embedding_free>>;
using Masks = std::unique_ptr<sam2_masks, Deleter<sam2_masks, sam2_masks_free>>;
using Bytes = std::unique_ptr<uint8_t, Deleter<void, std::free>>;

}  // namespace

int main(int argc, char **argv) try {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s ENCODER DECODER TESTDATA_DIR VERSION\n", argv[0]);
        return 2;
    }
    const std::string header_version = std::to_string(SAM2_VERSION_MAJOR) + "." +
                                       std::to_string(SAM2_VERSION_MINOR) + "." +
                                       std::to_string(SAM2_VERSION_PATCH);
    std::printf("sam2 header %s, library %s, expected %s\n", header_version.c_str(), sam2_version(),
                argv[4]);
    if (header_version != argv[4] || std::string(sam2_version()) != argv[4])
        throw std::runtime_error("versions disagree");

    check(sam2_runtime_init(nullptr), "sam2_runtime_init");
    std::printf("ONNX Runtime %s\n", sam2_runtime_version());

    const std::string testdata = argv[3];
    uint32_t width, height, channels, tw, th, tc;
    Bytes rgb(pnm_read((testdata + "/shapes.ppm").c_str(), &width, &height, &channels));
    Bytes truth(pnm_read((testdata + "/shapes_red_disc.pgm").c_str(), &tw, &th, &tc));
    if (!rgb || !truth || channels != 3 || tw != width || th != height)
        throw std::runtime_error("cannot read the test images in " + testdata);

    sam2_encoder *e = nullptr;
    check(sam2_encoder_new(argv[1], nullptr, &e), "sam2_encoder_new");
    Encoder encoder(e);
    sam2_predictor *p = nullptr;
    check(sam2_predictor_new(encoder.get(), argv[2], nullptr, &p), "sam2_predictor_new");
    Predictor predictor(p);
    sam2_embedding *emb = nullptr;
    check(sam2_encode(encoder.get(), rgb.get(), size_t(width) * height * 3, width, height, width * 3,
                      SAM2_PIXEL_RGB, &emb),
          "sam2_encode");
    Embedding embedding(emb);

    sam2_point click = {100.0f, 112.0f, SAM2_POINT_POSITIVE};  // inside the red disc
    sam2_prompt prompt = {&click, 1, 0, {0, 0, 0, 0}, nullptr, 0};
    sam2_masks *m = nullptr;
    check(sam2_predict(predictor.get(), embedding.get(), &prompt, 1, nullptr, &m), "sam2_predict");
    Masks masks(m);
    const uint8_t *mask = nullptr;
    size_t len = 0;
    check(sam2_masks_mask(masks.get(), 0, &mask, &len), "sam2_masks_mask");
    const double iou = len == size_t(width) * height ? pnm_iou(mask, truth.get(), len) : 0.0;
    std::printf("click (100, 112) on shapes.ppm: red disc IoU %.3f\n", iou);
    return iou >= 0.9 ? 0 : 1;
} catch (const std::exception &e) {
    std::fprintf(stderr, "sam2_consumer_cpp: %s\n", e.what());
    return 1;
}
