/*
 * Lifecycle: versions, runtime initialisation, options defaults, _free(NULL), and every order in
 * which a host may create, use and free encoders, embeddings, predictors and results. Run under
 * valgrind (tools/ci/test-valgrind.sh) this is also the leak and use-after-free check.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ---- Log callback: counts messages and remembers whether one named the runtime version ---- */

typedef struct log_record {
    int count;
    int saw_runtime_version;
    uint32_t max_level_seen;
} log_record;

static void record_log(uint32_t level, const char *message, void *user_data) {
    log_record *r = user_data;
    r->count++;
    if (level > r->max_level_seen) r->max_level_seen = level;
    if (strstr(message, "1.31.1") != NULL) r->saw_runtime_version = 1;
}

static void versions_and_runtime(void) {
    /* Nothing has failed on this thread yet: the message is empty (1 byte, the NUL). */
    char buf[64];
    size_t needed = 999;
    memset(buf, 'x', sizeof buf);
    CHECK_OK(sam2_last_error_message(buf, sizeof buf, &needed));
    CHECK(needed == 1 && buf[0] == '\0');

    char expected[64];
    snprintf(expected, sizeof expected, "%d.%d.%d", SAM2_VERSION_MAJOR, SAM2_VERSION_MINOR,
             SAM2_VERSION_PATCH);
    CHECK(sam2_version() != NULL);
    CHECK(strcmp(sam2_version(), expected) == 0);
    CHECK(sam2_version() == sam2_version()); /* static */

    /* Before anything loads ONNX Runtime there is no runtime version. */
    CHECK(sam2_runtime_version() == NULL);

    /* The log callback sees the runtime being loaded (an INFO message naming its version). */
    log_record log = {0, 0, 0};
    CHECK_OK(sam2_set_log_callback(record_log, &log, SAM2_LOG_INFO));
    CHECK(getenv("SAM2_ONNXRUNTIME_PATH") != NULL);
    CHECK_OK(sam2_runtime_init(NULL)); /* discovery: SAM2_ONNXRUNTIME_PATH */
    CHECK(log.count >= 1);
    CHECK(log.saw_runtime_version);
    CHECK(sam2_runtime_version() != NULL);
    CHECK(strcmp(sam2_runtime_version(), "1.31.1") == 0);

    /* Initialising again, by discovery or with the same file, is fine. */
    CHECK_OK(sam2_runtime_init(NULL));
    CHECK_OK(sam2_runtime_init(getenv("SAM2_ONNXRUNTIME_PATH")));
    CHECK(strcmp(sam2_runtime_version(), "1.31.1") == 0);

    /* Removing the callback: nothing more is delivered. */
    CHECK_OK(sam2_set_log_callback(NULL, NULL, SAM2_LOG_DEBUG));
    int before = log.count;
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_encoder_free(encoder);
    CHECK(log.count == before);
}

static void options_defaults(void) {
    sam2_encoder_options eo;
    memset(&eo, 0xAB, sizeof eo);
    CHECK_OK(sam2_encoder_options_init(&eo, sizeof eo));
    CHECK(eo.struct_size == sizeof eo);
    CHECK(eo.output_target == SAM2_OUTPUT_DEVICE);
    CHECK(eo.intra_threads == 0);
    CHECK(eo.providers == NULL && eo.provider_count == 0);
    CHECK(eo.on_device_mismatch == SAM2_ON_MISMATCH_FALLBACK);

    sam2_predictor_options po;
    memset(&po, 0xAB, sizeof po);
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    CHECK(po.struct_size == sizeof po);
    CHECK(po.intra_threads == 0);
    CHECK(po.encoder_fingerprint == NULL);
    CHECK(po.providers == NULL && po.provider_count == 0);
    CHECK(po.on_device_mismatch == SAM2_ON_MISMATCH_FALLBACK);
    CHECK(po.allow_embedding_copy == 0);

    sam2_predict_options pr;
    memset(&pr, 0xAB, sizeof pr);
    CHECK_OK(sam2_predict_options_init(&pr, sizeof pr));
    CHECK(pr.struct_size == sizeof pr);
    CHECK(pr.multimask == 0);

    /* Initialised options are accepted as they are, and with changed fields. */
    char path[TEST_PATH_MAX];
    sam2_encoder *encoder = NULL;
    eo.output_target = SAM2_OUTPUT_HOST;
    eo.intra_threads = 1;
    CHECK_OK(sam2_encoder_new(test_model_path(path, "tiny_a_encoder.onnx"), &eo, &encoder));
    sam2_predictor *predictor = NULL;
    po.intra_threads = 1;
    CHECK_OK(sam2_predictor_new(encoder, test_model_path(path, "tiny_a_decoder.onnx"), &po,
                                &predictor));
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
}

/* The first published layouts of the options structs (0.1.0): a program compiled against them
 * passes a smaller struct_size, and must keep working when the structs grow. */
typedef struct encoder_options_v1 {
    uint32_t struct_size, output_target, intra_threads;
} encoder_options_v1;
typedef struct predictor_options_v1 {
    uint32_t struct_size, intra_threads;
    const char *encoder_fingerprint;
} predictor_options_v1;
typedef struct predict_options_v1 {
    uint32_t struct_size, multimask;
} predict_options_v1;

static void older_callers_options(const test_image *image) {
    char path[TEST_PATH_MAX];
    encoder_options_v1 eo = {sizeof(encoder_options_v1), SAM2_OUTPUT_HOST, 1};
    CHECK(eo.struct_size == 12);
    sam2_encoder *encoder = NULL;
    CHECK_OK(sam2_encoder_new(test_model_path(path, "tiny_a_encoder.onnx"),
                              (const sam2_encoder_options *)(const void *)&eo, &encoder));
    char fingerprint[64];
    CHECK_OK(sam2_encoder_fingerprint(encoder, fingerprint, sizeof fingerprint, NULL));

    predictor_options_v1 po = {sizeof(predictor_options_v1), 1, fingerprint};
    CHECK(po.struct_size == 16);
    sam2_predictor *predictor = NULL;
    CHECK_OK(sam2_predictor_new(NULL, test_model_path(path, "tiny_a_decoder.onnx"),
                                (const sam2_predictor_options *)(const void *)&po, &predictor));

    sam2_embedding *embedding = test_encode(encoder, image);
    predict_options_v1 pr = {sizeof(predict_options_v1), 1};
    sam2_point pt = {TEST_SHAPES[0].click[0], TEST_SHAPES[0].click[1], SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    sam2_masks *masks = NULL;
    CHECK_OK(sam2_predict(predictor, embedding, &prompt, 1,
                          (const sam2_predict_options *)(const void *)&pr, &masks));
    size_t objects = 0, candidates = 0;
    CHECK_OK(sam2_masks_count(masks, &objects, &candidates));
    CHECK(objects == 1 && candidates == 3);
    sam2_masks_free(masks);

    /* The v1 fingerprint field was read: another encoder's embedding is refused. */
    sam2_encoder *other = test_open_encoder("tiny_a_fp16");
    sam2_embedding *foreign = test_encode(other, image);
    CHECK_STATUS(sam2_predict(predictor, foreign, &prompt, 1, NULL, &masks),
                 SAM2_ERR_MODEL_MISMATCH);
    sam2_embedding_free(foreign);
    sam2_encoder_free(other);

    sam2_embedding_free(embedding);
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
}

static void free_null_is_a_no_op(void) {
    sam2_encoder_free(NULL);
    sam2_embedding_free(NULL);
    sam2_predictor_free(NULL);
    sam2_masks_free(NULL);
}

/* Checks a one-object result against the truth of shape `shape`, reading every accessor. */
static void check_result(const sam2_masks *masks, const test_truth *truth, int shape) {
    size_t objects = 0, candidates = 0;
    CHECK_OK(sam2_masks_count(masks, &objects, &candidates));
    CHECK(objects == 1 && candidates == 1);
    uint32_t w = 0, h = 0;
    CHECK_OK(sam2_masks_size(masks, &w, &h));
    CHECK(w == truth->width && h == truth->height);
    size_t n = (size_t)w * h;
    const uint8_t *mask = test_mask(masks, 0, n);
    uint8_t *want = test_click_truth(truth, shape);
    double iou = test_iou(mask, want, n);
    free(want);
    if (iou < 0.9) fprintf(stderr, "%s: IoU %.3f\n", TEST_SHAPES[shape].name, iou);
    CHECK(iou >= 0.9);
    const float *logits = NULL;
    size_t len = 0;
    uint32_t side = 0;
    CHECK_OK(sam2_masks_low_res(masks, 0, &logits, &len, &side));
    CHECK(logits != NULL && len == (size_t)side * side && side == 256);
    float sum = 0; /* reads every logit: valgrind flags a dangling pointer */
    for (size_t i = 0; i < len; i++) sum += logits[i];
    CHECK(sum == sum);
    float score = -1;
    CHECK_OK(sam2_masks_score(masks, 0, &score));
    CHECK(score == score);
}

static sam2_masks *click(const sam2_predictor *p, const sam2_embedding *e, int shape) {
    sam2_point pt = {TEST_SHAPES[shape].click[0], TEST_SHAPES[shape].click[1],
                     SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&pt, 1);
    return test_predict1(p, e, &prompt);
}

/* The encoder is freed first; then the embedding, the predictor and the results in turn. */
static void free_encoder_before_everything(const test_image *image, const test_truth *truth) {
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    char fingerprint[64];
    CHECK_OK(sam2_encoder_fingerprint(encoder, fingerprint, sizeof fingerprint, NULL));
    sam2_embedding *embedding = test_encode(encoder, image);
    sam2_encoder_free(encoder); /* embeddings do not depend on their encoder */

    /* A predictor told the fingerprint (the encoder is gone). */
    sam2_predictor_options po;
    CHECK_OK(sam2_predictor_options_init(&po, sizeof po));
    po.encoder_fingerprint = fingerprint;
    char path[TEST_PATH_MAX];
    sam2_predictor *predictor = NULL;
    CHECK_OK(sam2_predictor_new(NULL, test_model_path(path, "tiny_a_decoder.onnx"), &po,
                                &predictor));
    memset(fingerprint, 0, sizeof fingerprint); /* read during _new only */

    char emb_fp[64];
    CHECK_OK(sam2_embedding_fingerprint(embedding, emb_fp, sizeof emb_fp, NULL));
    CHECK(strncmp(emb_fp, "sam2fp1-", 8) == 0);
    const char *allocator = sam2_embedding_allocator_name(embedding);
    CHECK(allocator != NULL && strcmp(allocator, "Cpu") == 0);
    CHECK(sam2_embedding_is_serializable(embedding) == 1);
    int32_t device = -1;
    CHECK_OK(sam2_embedding_device_id(embedding, &device));
    CHECK(device == 0);
    uint32_t w = 0, h = 0;
    CHECK_OK(sam2_embedding_image_size(embedding, &w, &h));
    CHECK(w == image->width && h == image->height);

    sam2_masks *a = click(predictor, embedding, RED_DISC);
    sam2_masks *b = click(predictor, embedding, GREEN_RECT);
    sam2_embedding_free(embedding); /* results do not depend on the embedding */
    check_result(a, truth, RED_DISC);
    sam2_predictor_free(predictor); /* nor on the predictor */
    check_result(b, truth, GREEN_RECT);
    sam2_masks_free(b);
    check_result(a, truth, RED_DISC);
    sam2_masks_free(a);
}

/* A predictor created with an encoder outlives it, and accepts embeddings made later by another
 * encoder loaded from the same file. */
static void predictor_outlives_its_encoder(const test_image *image, const test_truth *truth) {
    sam2_encoder *first = test_open_encoder("tiny_a");
    sam2_predictor *predictor = test_open_predictor(first, "tiny_a");
    sam2_encoder_free(first);

    sam2_encoder *second = test_open_encoder("tiny_a");
    sam2_embedding *embedding = test_encode(second, image);
    sam2_masks *m = click(predictor, embedding, YELLOW_TRIANGLE);
    sam2_predictor_free(predictor);
    sam2_encoder_free(second);
    sam2_embedding_free(embedding);
    check_result(m, truth, YELLOW_TRIANGLE);
    sam2_masks_free(m);
}

/* The allocator name belongs to the embedding; pointers from a result to the result. */
static void borrowed_pointers_live_as_long_as_their_owner(const test_image *image,
                                                          const test_truth *truth) {
    sam2_encoder *encoder = test_open_encoder("tiny_a");
    sam2_predictor *predictor = test_open_predictor(encoder, "tiny_a");
    sam2_embedding *embedding = test_encode(encoder, image);
    const char *allocator = sam2_embedding_allocator_name(embedding);
    CHECK(allocator == sam2_embedding_allocator_name(embedding)); /* stable */
    sam2_predictor_free(predictor);
    sam2_encoder_free(encoder);
    CHECK(strcmp(allocator, "Cpu") == 0);

    /* One embedding, two predictors of different decoders with the same encoder family. */
    sam2_predictor *pa = test_open_predictor(NULL, "tiny_a");
    sam2_predictor *pb = test_open_predictor(NULL, "tiny_b");
    sam2_masks *ma = click(pa, embedding, TWIN_LEFT);
    sam2_predictor_free(pa);
    sam2_masks *mb = click(pb, embedding, TWIN_RIGHT);
    sam2_embedding_free(embedding);
    sam2_predictor_free(pb);

    const uint8_t *data = test_mask(ma, 0, (size_t)truth->width * truth->height);
    CHECK(data == test_mask(ma, 0, (size_t)truth->width * truth->height)); /* stable */
    check_result(ma, truth, TWIN_LEFT);
    check_result(mb, truth, TWIN_RIGHT);
    sam2_masks_free(mb);
    sam2_masks_free(ma);
}

/* Many short-lived objects: under valgrind, any leak per cycle shows up as definite. The last
 * cycle is of another model. Under valgrind, where a cycle costs about 10 s, two cycles (tiny_a,
 * then tiny_c once tiny_a's objects are freed; the sections above already reopen tiny_a after
 * freeing it); three otherwise. */
static void repeated_cycles(const test_image *image) {
    int cycles = test_under_valgrind() ? 2 : 3;
    for (int cycle = 0; cycle < cycles; cycle++) {
        const char *pair = cycle == cycles - 1 ? "tiny_c" : "tiny_a";
        sam2_encoder *encoder = test_open_encoder(pair);
        sam2_predictor *predictor = test_open_predictor(encoder, pair);
        sam2_embedding *embedding = test_encode(encoder, image);
        sam2_masks *m = click(predictor, embedding, cycle);
        sam2_masks_free(m);
        sam2_embedding_free(embedding);
        sam2_predictor_free(predictor);
        sam2_encoder_free(encoder);
    }
}

/* The last error message survives successful calls, and reading it does not clear it. */
static void last_error_is_sticky(const test_image *image) {
    sam2_encoder *encoder = NULL;
    CHECK_STATUS(sam2_encoder_new("/nonexistent/tiny.onnx", NULL, &encoder), SAM2_ERR_MODEL);
    CHECK(encoder == NULL);
    CHECK_MESSAGE("/nonexistent/tiny.onnx");
    encoder = test_open_encoder("tiny_a");
    sam2_embedding *embedding = test_encode(encoder, image);
    CHECK_MESSAGE("/nonexistent/tiny.onnx");
    CHECK_MESSAGE("/nonexistent/tiny.onnx");
    sam2_embedding_free(embedding);
    sam2_encoder_free(encoder);
    CHECK_MESSAGE("/nonexistent/tiny.onnx");
}

int main(void) {
    test_default_environment();
    versions_and_runtime();
    options_defaults();
    free_null_is_a_no_op();
    test_image image = test_load_image("shapes.ppm");
    test_truth truth = test_load_truth();
    older_callers_options(&image);
    free_encoder_before_everything(&image, &truth);
    predictor_outlives_its_encoder(&image, &truth);
    borrowed_pointers_live_as_long_as_their_owner(&image, &truth);
    repeated_cycles(&image);
    last_error_is_sticky(&image);
    free_null_is_a_no_op();
    test_truth_free(&truth);
    test_image_free(&image);
    printf("test_lifecycle: ok\n");
    return 0;
}
