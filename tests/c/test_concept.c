/*
 * SAM 3 through the C ABI (sam2_concept_model, sam2_concept_result), on the reduced export that
 * tools/setup/setup-sam3.sh makes ($SAM2_SAM3_MODELS, CLIP's vocabulary at $SAM2_SAM3_VOCAB) and
 * testdata/demo.ppm:
 *   - a phrase, boxes alone, and both, in one call: each instance names its concept, scores above
 *     the threshold, best first within its concept, its mask's area as reported;
 *   - threshold 0 keeps every query (200 per concept), max_instances caps, box suppression
 *     thins, masks = 0 gives boxes and scores alone; the same call twice gives the same result;
 *   - a host embedding saved and loaded segments as the original; a SAM2 embedding is refused
 *     with SAM2_ERR_MODEL_MISMATCH;
 *   - bad input: NULL for each pointer, no concept, 257 and 1,000 concepts, an empty concept, a
 *     phrase that is not UTF-8, NaN, inverted, empty, outside and too many boxes, options out of
 *     range, an index out of range, a buffer too small: each a status naming the argument, and
 *     nothing written.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define QUERIES 200

static const char *need(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "%s is not set: run tools/setup/setup-sam3.sh (the test command does)\n",
                name);
        exit(1);
    }
    return v;
}

static sam2_concept_model *open_model(void) {
    sam2_concept_model_options o;
    CHECK_OK(sam2_concept_model_options_init(&o, sizeof o));
    o.output_target = SAM2_OUTPUT_HOST;
    o.vocabulary_path = need("SAM2_SAM3_VOCAB");
    sam2_concept_model *model = NULL;
    CHECK_OK(sam2_concept_model_new(need("SAM2_SAM3_MODELS"), &o, &model));
    return model;
}

static sam2_concept_result *segment(const sam2_concept_model *model, const sam2_embedding *e,
                                    const sam2_concept *concepts, size_t n,
                                    const sam2_concept_segment_options *o) {
    sam2_concept_result *r = NULL;
    CHECK_OK(sam2_concept_segment(model, e, concepts, n, o, &r));
    return r;
}

/* Checks a result's conventions and returns its instance count. */
static size_t check_result(const sam2_concept_result *r, size_t concepts, float threshold,
                           int masks) {
    size_t n = 0, c = 0;
    uint32_t w = 0, h = 0;
    CHECK_OK(sam2_concept_result_count(r, &n, &c, &w, &h));
    CHECK(c == concepts);
    CHECK(w == 800 && h == 600);
    size_t plane = (size_t)w * h, per[8] = {0};
    uint8_t *mask = malloc(plane);
    CHECK(mask != NULL);
    size_t last_concept = 0;
    float last_score = 2.0f;
    for (size_t i = 0; i < n; i++) {
        sam2_instance_info info;
        CHECK_OK(sam2_concept_result_instance(r, i, &info));
        CHECK(info.concept < concepts && info.concept >= last_concept);
        if (info.concept != last_concept) last_score = 2.0f;
        CHECK(info.score > threshold && info.score <= last_score);
        CHECK(info.query < QUERIES);
        for (int k = 0; k < 4; k++) CHECK(isfinite(info.box[k]));
        CHECK(info.box[0] <= info.box[2] && info.box[1] <= info.box[3]);
        if (masks) {
            CHECK_OK(sam2_concept_result_mask(r, i, mask, plane));
            CHECK(test_area(mask, plane) == info.area);
        } else {
            CHECK(info.area == 0);
            CHECK_FAILS(sam2_concept_result_mask(r, i, mask, plane), SAM2_ERR_INVALID_ARGUMENT,
                        "without masks");
        }
        last_concept = info.concept;
        last_score = info.score;
        per[info.concept]++;
    }
    for (size_t k = 0; k < concepts; k++) {
        sam2_concept_summary s;
        CHECK_OK(sam2_concept_result_summary(r, k, &s));
        CHECK(s.presence >= 0.0f && s.presence <= 1.0f);
        CHECK(s.instances == per[k]);
        CHECK(s.truncated == 0);
    }
    free(mask);
    return n;
}

int main(void) {
    test_default_environment();
    test_init_runtime();
    test_image image = test_load_image("demo.ppm");
    size_t len = (size_t)image.width * image.height * 3;
    sam2_concept_model *model = open_model();
    size_t slots = 0;
    CHECK_OK(sam2_concept_model_max_exemplars(model, &slots));
    CHECK(slots == 8);
    sam2_embedding *e = NULL;
    CHECK_OK(sam2_concept_encode(model, image.data, len, image.width, image.height, 0,
                                 SAM2_PIXEL_RGB, &e));
    CHECK(sam2_embedding_is_serializable(e) == 1);

    /* A phrase, boxes alone, both. */
    sam2_exemplar star = {{52, 82, 327, 257}, 1}, other = {{500, 100, 700, 300}, 0};
    sam2_exemplar both[2] = {star, other};
    sam2_concept concepts[3] = {
        {"purple star", NULL, 0}, {NULL, &star, 1}, {"shape", both, 2}};
    sam2_concept_result *r = segment(model, e, concepts, 3, NULL);
    size_t found = check_result(r, 3, 0.5f, 1);
    CHECK(found > 0); /* the set-up's export sharpens random weights' scores (docs/sam3.md) */
    printf("test_concept: %zu instances of 3 concepts\n", found);

    /* The first concept again: the same instances (phrases are remembered, not recomputed). */
    sam2_concept_result *again = segment(model, e, concepts, 1, NULL);
    size_t n2 = 0, c2 = 0, first = 0;
    uint32_t w2, h2;
    sam2_concept_summary first_summary;
    CHECK_OK(sam2_concept_result_summary(r, 0, &first_summary));
    first = first_summary.instances;
    CHECK_OK(sam2_concept_result_count(again, &n2, &c2, &w2, &h2));
    CHECK(n2 == first);
    for (size_t i = 0; i < first; i++) {
        sam2_instance_info a, b;
        CHECK_OK(sam2_concept_result_instance(r, i, &a));
        CHECK_OK(sam2_concept_result_instance(again, i, &b));
        CHECK(a.query == b.query && a.score == b.score && a.area == b.area);
    }
    sam2_concept_result_free(again);

    /* One encode serves the clicks too: SAM 3's click decoder, opened for the model's encoder,
     * segments a click on the same embedding; a SAM2 decoder refuses it. */
    sam2_encoder *shared = NULL;
    CHECK_OK(sam2_concept_model_encoder(model, &shared));
    char clicks_path[TEST_PATH_MAX];
    snprintf(clicks_path, sizeof clicks_path, "%s/sam3_interactive_decoder.onnx",
             need("SAM2_SAM3_MODELS"));
    sam2_predictor *clicks = NULL;
    CHECK_OK(sam2_predictor_new(shared, clicks_path, NULL, &clicks));
    sam2_point click = {580.0f, 190.0f, SAM2_POINT_POSITIVE};
    sam2_prompt prompt = test_points_prompt(&click, 1);
    sam2_masks *clicked = test_predict1(clicks, e, &prompt);
    size_t objects = 0, candidates = 0;
    uint32_t mw = 0, mh = 0;
    CHECK_OK(sam2_masks_count(clicked, &objects, &candidates));
    CHECK_OK(sam2_masks_size(clicked, &mw, &mh));
    CHECK(objects == 1 && candidates == 1 && mw == 800 && mh == 600);
    sam2_masks_free(clicked);
    sam2_predictor_free(clicks);
    sam2_encoder_free(shared);
    sam2_predictor *sam2_clicks = test_open_predictor(NULL, "tiny_a");
    sam2_masks *refused = NULL;
    CHECK_FAILS(sam2_predict(sam2_clicks, e, &prompt, 1, NULL, &refused), SAM2_ERR_MODEL_MISMATCH,
                "sam3");
    CHECK(refused == NULL);
    sam2_predictor_free(sam2_clicks);

    /* Threshold 0 keeps every query; a cap; box suppression; no masks. */
    sam2_concept_segment_options o;
    CHECK_OK(sam2_concept_segment_options_init(&o, sizeof o));
    CHECK(o.score_threshold == 0.5f && o.max_instances == 200 && o.masks == 1);
    o.score_threshold = 0.0f;
    o.masks = 0;
    sam2_concept_result *all = segment(model, e, concepts, 1, &o);
    CHECK(check_result(all, 1, 0.0f, 0) == QUERIES);
    sam2_concept_result_free(all);
    o.max_instances = 3;
    sam2_concept_result *capped = segment(model, e, concepts, 1, &o);
    CHECK(check_result(capped, 1, 0.0f, 0) == 3);
    sam2_concept_result_free(capped);
    o.max_instances = 200;
    o.nms = SAM2_NMS_BOXES;
    o.nms_iou = 0.3f;
    sam2_concept_result *thinned = segment(model, e, concepts, 1, &o);
    size_t kept = check_result(thinned, 1, 0.0f, 0);
    CHECK(kept >= 1 && kept < QUERIES);
    sam2_concept_result_free(thinned);

    /* A host embedding saved and loaded segments as the original. */
    char dir[TEST_PATH_MAX], path[TEST_PATH_MAX + 32];
    test_scratch_template(dir, "concept");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/demo.sam2emb", dir);
    CHECK_OK(sam2_embedding_save(e, path));
    sam2_embedding *loaded = NULL;
    CHECK_OK(sam2_embedding_load(path, NULL, SAM2_PLACE_HOST, &loaded));
    sam2_concept_result *from_file = segment(model, loaded, concepts, 1, NULL);
    size_t n3 = 0, c3 = 0;
    CHECK_OK(sam2_concept_result_count(from_file, &n3, &c3, &w2, &h2));
    CHECK(n3 == first);
    for (size_t i = 0; i < first; i++) {
        sam2_instance_info a, b;
        CHECK_OK(sam2_concept_result_instance(r, i, &a));
        CHECK_OK(sam2_concept_result_instance(from_file, i, &b));
        CHECK(a.query == b.query && a.score == b.score && a.area == b.area);
    }
    sam2_concept_result_free(from_file);
    sam2_embedding_free(loaded);
    unlink(path);
    rmdir(dir);

    /* A SAM2 embedding is refused. */
    test_image shapes = test_load_image("shapes.ppm");
    sam2_encoder *sam2enc = test_open_encoder("tiny_a");
    sam2_embedding *sam2emb = test_encode(sam2enc, &shapes);
    sam2_concept_result *none = NULL;
    CHECK_FAILS(sam2_concept_segment(model, sam2emb, concepts, 1, NULL, &none),
                SAM2_ERR_MODEL_MISMATCH, "SAM2 image encoder");
    CHECK(none == NULL);
    sam2_embedding_free(sam2emb);
    sam2_encoder_free(sam2enc);
    test_image_free(&shapes);

    /* NULL for each pointer. */
    sam2_concept_model *no_model = NULL;
    CHECK_FAILS(sam2_concept_model_new(NULL, NULL, &no_model), SAM2_ERR_NULL_ARGUMENT, "`path`");
    CHECK_FAILS(sam2_concept_model_new(need("SAM2_SAM3_MODELS"), NULL, NULL),
                SAM2_ERR_NULL_ARGUMENT, "`out`");
    CHECK_FAILS(sam2_concept_segment(NULL, e, concepts, 1, NULL, &none), SAM2_ERR_NULL_ARGUMENT,
                "`model`");
    CHECK_FAILS(sam2_concept_segment(model, NULL, concepts, 1, NULL, &none),
                SAM2_ERR_NULL_ARGUMENT, "`embedding`");
    CHECK_FAILS(sam2_concept_segment(model, e, NULL, 1, NULL, &none), SAM2_ERR_NULL_ARGUMENT,
                "`concepts`");
    CHECK_FAILS(sam2_concept_segment(model, e, concepts, 1, NULL, NULL), SAM2_ERR_NULL_ARGUMENT,
                "`out`");
    sam2_concept null_boxes = {"cat", NULL, 2};
    CHECK_FAILS(sam2_concept_segment(model, e, &null_boxes, 1, NULL, &none),
                SAM2_ERR_NULL_ARGUMENT, "exemplars");
    sam2_embedding *no_e = NULL;
    CHECK_FAILS(sam2_concept_encode(model, NULL, len, image.width, image.height, 0,
                                    SAM2_PIXEL_RGB, &no_e),
                SAM2_ERR_NULL_ARGUMENT, "`pixels`");
    CHECK(no_e == NULL);
    sam2_concept_model_free(NULL);
    sam2_concept_result_free(NULL);

    /* Bad concepts and options: a status naming the argument; nothing written. */
    CHECK_FAILS(sam2_concept_segment(model, e, concepts, 0, NULL, &none),
                SAM2_ERR_INVALID_ARGUMENT, "at least one");
    sam2_concept *many = calloc(1000, sizeof *many);
    for (int i = 0; i < 1000; i++) many[i].phrase = "cat";
    CHECK_FAILS(sam2_concept_segment(model, e, many, 257, NULL, &none),
                SAM2_ERR_INVALID_ARGUMENT, "at most 256");
    CHECK_FAILS(sam2_concept_segment(model, e, many, 1000, NULL, &none),
                SAM2_ERR_INVALID_ARGUMENT, "at most 256");
    free(many);
    sam2_concept empty = {NULL, NULL, 0};
    CHECK_FAILS(sam2_concept_segment(model, e, &empty, 1, NULL, &none),
                SAM2_ERR_INVALID_ARGUMENT, "neither a phrase nor an exemplar box");
    sam2_concept latin1 = {"caf\xe9", NULL, 0};
    CHECK_FAILS(sam2_concept_segment(model, e, &latin1, 1, NULL, &none),
                SAM2_ERR_INVALID_ARGUMENT, "UTF-8");
    struct {
        sam2_exemplar box;
        const char *needle;
    } bad_boxes[] = {
        {{{NAN, 0, 10, 10}, 1}, "finite"},
        {{{20, 20, 10, 30}, 1}, "inverted"},
        {{{20, 20, 20, 30}, 1}, "empty"},
        {{{700, 500, 900, 700}, 1}, "outside"},
        {{{10, 10, 20, 20}, 2}, "positive"},
    };
    for (size_t i = 0; i < sizeof bad_boxes / sizeof bad_boxes[0]; i++) {
        sam2_concept c = {"cat", &bad_boxes[i].box, 1};
        CHECK_FAILS(sam2_concept_segment(model, e, &c, 1, NULL, &none),
                    SAM2_ERR_INVALID_ARGUMENT, bad_boxes[i].needle);
    }
    sam2_exemplar nine[9];
    for (int i = 0; i < 9; i++) nine[i] = star;
    sam2_concept too_many = {"cat", nine, 9};
    CHECK_FAILS(sam2_concept_segment(model, e, &too_many, 1, NULL, &none),
                SAM2_ERR_INVALID_ARGUMENT, "at most 8");
    sam2_exemplar *lots = calloc(10000, sizeof *lots);
    sam2_concept ten_thousand = {"cat", lots, 10000};
    CHECK_FAILS(sam2_concept_segment(model, e, &ten_thousand, 1, NULL, &none),
                SAM2_ERR_INVALID_ARGUMENT, "exemplar_count");
    free(lots);
    CHECK_OK(sam2_concept_segment_options_init(&o, sizeof o));
    o.score_threshold = NAN;
    CHECK_FAILS(sam2_concept_segment(model, e, concepts, 1, &o, &none),
                SAM2_ERR_INVALID_ARGUMENT, "score_threshold");
    CHECK_OK(sam2_concept_segment_options_init(&o, sizeof o));
    o.nms = 7;
    CHECK_FAILS(sam2_concept_segment(model, e, concepts, 1, &o, &none),
                SAM2_ERR_INVALID_ARGUMENT, "options.nms");
    CHECK_OK(sam2_concept_segment_options_init(&o, sizeof o));
    o.nms = SAM2_NMS_MASKS;
    o.nms_iou = 1.5f;
    CHECK_FAILS(sam2_concept_segment(model, e, concepts, 1, &o, &none),
                SAM2_ERR_INVALID_ARGUMENT, "nms_iou");
    CHECK_OK(sam2_concept_segment_options_init(&o, sizeof o));
    o.struct_size = 3;
    CHECK_FAILS(sam2_concept_segment(model, e, concepts, 1, &o, &none),
                SAM2_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK(none == NULL);

    /* Indices and buffers. */
    size_t n = 0, c = 0;
    uint32_t w = 0, h = 0;
    CHECK_OK(sam2_concept_result_count(r, &n, &c, &w, &h));
    sam2_instance_info info;
    CHECK_FAILS(sam2_concept_result_instance(r, n, &info), SAM2_ERR_INVALID_ARGUMENT, "index");
    sam2_concept_summary s;
    CHECK_FAILS(sam2_concept_result_summary(r, 3, &s), SAM2_ERR_INVALID_ARGUMENT, "index");
    if (n > 0) {
        uint8_t small[16];
        CHECK_STATUS(sam2_concept_result_mask(r, 0, small, sizeof small),
                     SAM2_ERR_BUFFER_TOO_SMALL);
    }

    /* A folder that is not an export, and a SAM2 encoder given as SAM 3's. */
    char tiny[TEST_PATH_MAX];
    test_model_path(tiny, "tiny_a_encoder.onnx");
    CHECK_FAILS(sam2_concept_model_new(tiny, NULL, &no_model), SAM2_ERR_MODEL, "not a SAM 3 export");
    CHECK(no_model == NULL);

    sam2_concept_result_free(r);
    sam2_embedding_free(e);
    sam2_concept_model_free(model);
    test_image_free(&image);
    printf("test_concept: ok\n");
    return 0;
}
