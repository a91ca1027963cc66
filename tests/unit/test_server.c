/*
 * test_server.c — the server's pure parts: the job queue (a
 * conversation's jobs in order and in one partition, capacity, closing
 * drains), the event bus (numbered events, reads after a number, results,
 * capacity, expiry, owners), API key tokens and their hashes, and how API
 * roles map onto a pack's roles.
 */
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "pipeline/pipeline.h"
#include "server/auth.h"
#include "server/bus.h"
#include "server/queue.h"
#include "store/store.h"
#include "unit.h"

static struct job *job_make(const char *conversation, const char *message)
{
    struct job *job = keel_calloc(1, sizeof(*job));

    ck_assert_ptr_nonnull(job);
    snprintf(job->conversation_id, sizeof(job->conversation_id), "%s", conversation);
    job->message = keel_strdup(message);
    job->message_len = strlen(message);
    return job;
}

START_TEST(test_queue_keeps_a_conversation_in_order)
{
    struct queue *q = queue_new(4, 100);
    struct job *a, *b, *none;
    char seen[64] = "";

    for (int i = 0; i < 3; i++) {
        char m[8];
        snprintf(m, sizeof(m), "a%d", i);
        ck_assert_int_eq(queue_push(q, job_make("conv_a", m)), KEEL_OK);
        snprintf(m, sizeof(m), "b%d", i);
        ck_assert_int_eq(queue_push(q, job_make("conv_b", m)), KEEL_OK);
    }
    ck_assert_uint_eq(queue_depth(q), 6);
    ck_assert(!queue_drained(q));
    /* In the order they came; while a conversation's turn runs, its next
     * one does not come out, another conversation's does. */
    a = queue_take(q, 0);
    ck_assert_str_eq(a->message, "a0");
    b = queue_take(q, 0);
    ck_assert_str_eq(b->message, "b0");
    if (a->partition != b->partition) {
        none = queue_take(q, 0);   /* a1 and b1 wait for a0 and b0 */
        ck_assert_ptr_null(none);
    }
    queue_done(q, b);
    job_free(b);
    b = queue_take(q, 0);
    ck_assert_str_eq(b->message, "b1");
    queue_done(q, a);
    job_free(a);
    queue_done(q, b);
    job_free(b);
    queue_close(q);
    /* Closed: pushes are refused, queued jobs still come out. */
    {
        struct job *late = job_make("conv_c", "late");
        ck_assert_int_eq(queue_push(q, late), KEEL_EFAIL);
        job_free(late);
    }
    while ((a = queue_take(q, 1))) {
        strncat(seen, a->message, sizeof(seen) - strlen(seen) - 1);
        queue_done(q, a);
        job_free(a);
    }
    ck_assert_str_eq(seen, "a1a2b2");
    ck_assert_uint_eq(queue_depth(q), 0);
    ck_assert(queue_drained(q));   /* closed, and every job taken */
    queue_free(q);
}
END_TEST

START_TEST(test_queue_capacity_and_free)
{
    struct queue *q = queue_new(2, 2);
    struct job *third = job_make("conv_x", "3");

    ck_assert_int_eq(queue_push(q, job_make("conv_x", "1")), KEEL_OK);
    ck_assert_int_eq(queue_push(q, job_make("conv_y", "2")), KEEL_OK);
    ck_assert_int_eq(queue_push(q, third), KEEL_EFAIL);   /* full: the caller keeps it */
    job_free(third);
    queue_free(q);   /* frees the two still queued */
}
END_TEST

static void *pop_one(void *arg)
{
    return queue_take(arg, 1);
}

START_TEST(test_queue_pop_waits_for_a_job)
{
    struct queue *q = queue_new(1, 10);
    pthread_t t;
    struct job *got = NULL;

    ck_assert_int_eq(pthread_create(&t, NULL, pop_one, q), 0);
    ck_assert_int_eq(queue_push(q, job_make("conv_w", "wake")), KEEL_OK);
    pthread_join(t, (void **)&got);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got->message, "wake");
    /* A taker waits while the only jobs are of a running conversation,
     * and queue_done lets it go on. */
    ck_assert_int_eq(queue_push(q, job_make("conv_w", "next")), KEEL_OK);
    ck_assert_ptr_null(queue_take(q, 0));
    ck_assert_int_eq(pthread_create(&t, NULL, pop_one, q), 0);
    queue_done(q, got);
    job_free(got);
    got = NULL;
    pthread_join(t, (void **)&got);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got->message, "next");
    queue_done(q, got);
    job_free(got);
    /* A kick cuts a wait short: NULL, though the queue is open. */
    ck_assert_int_eq(pthread_create(&t, NULL, pop_one, q), 0);
    queue_kick(q);
    got = (struct job *)1;
    pthread_join(t, (void **)&got);
    ck_assert_ptr_null(got);
    ck_assert(!queue_drained(q));
    queue_free(q);
}
END_TEST

static int notified, notified_ended;

static void count_notify(void *ctx, int ended)
{
    (void)ctx;
    notified++;
    notified_ended += ended;
}

START_TEST(test_bus_numbers_events_and_keeps_results)
{
    struct bus *bus = bus_new(3, 1000, count_notify, NULL);
    json_t *events = NULL, *result = NULL, *error = NULL;
    char conv[64], owner[32];

    notified = notified_ended = 0;
    ck_assert_int_eq(bus_open(bus, "turn_1", "conv_1", "alice", 0, 0), KEEL_OK);
    ck_assert_int_eq(bus_read(bus, "turn_1", 0, NULL, NULL, NULL, NULL, 0), BUS_QUEUED);
    bus_running(bus, "turn_1");
    ck_assert_int_eq(bus_publish(bus, "turn_1", "stage", json_pack("{s:s}", "m", "a")), 1);
    ck_assert_int_eq(bus_publish(bus, "turn_1", "token", json_pack("{s:s}", "text", "b")), 2);
    ck_assert_int_eq(bus_publish(bus, "turn_nope", "token", json_object()), 0);
    ck_assert_int_eq(bus_read(bus, "turn_1", 1, &events, NULL, NULL, conv, sizeof(conv)),
                     BUS_RUNNING);
    ck_assert_uint_eq(json_array_size(events), 1);   /* only after event 1 */
    ck_assert_str_eq(json_string_value(json_array_get(events, 0)),
                     "id: 2\nevent: token\ndata: {\"text\":\"b\"}\n\n");
    ck_assert_str_eq(conv, "conv_1");
    json_decref(events);
    ck_assert(bus_owner(bus, "turn_1", owner, sizeof(owner)));
    ck_assert_str_eq(owner, "alice");
    ck_assert(!bus_owner(bus, "turn_nope", owner, sizeof(owner)));
    bus_finish(bus, "turn_1", json_pack("{s:s, s:f}", "answer", "hi", "p", 0.1), NULL, 100);
    ck_assert_int_eq(bus_read(bus, "turn_1", 0, NULL, &result, &error, NULL, 0), BUS_DONE);
    ck_assert_str_eq(json_string_value(json_object_get(result, "answer")), "hi");
    ck_assert_ptr_null(error);
    json_decref(result);
    /* the result is the `done` event bus_finish appended, its data as SSE's */
    ck_assert_int_eq(bus_read(bus, "turn_1", 2, &events, NULL, NULL, NULL, 0), BUS_DONE);
    ck_assert_uint_eq(json_array_size(events), 1);
    ck_assert_str_eq(json_string_value(json_array_get(events, 0)),
                     "id: 3\nevent: done\ndata: {\"answer\":\"hi\",\"p\":0.10000000000000001}\n\n");
    json_decref(events);
    ck_assert_uint_eq(bus_open_turns(bus), 0);
    ck_assert_int_ge(notified, 4);   /* running, two publishes, finish */
    ck_assert_int_eq(notified_ended, 1);   /* only the finish says a turn ended */

    /* Capacity 3: finished turns make room, running ones do not. */
    ck_assert(bus_events_kept(bus, "turn_1"));
    ck_assert(!bus_events_kept(bus, "turn_nope"));
    ck_assert_int_eq(bus_open(bus, "turn_2", "c", "", 0, 0), KEEL_OK);
    ck_assert_int_eq(bus_open(bus, "turn_3", "c", "", 1, 0), KEEL_OK);   /* quiet */
    ck_assert(bus_events_kept(bus, "turn_2"));
    ck_assert(!bus_events_kept(bus, "turn_3"));
    ck_assert_int_eq(bus_open(bus, "turn_4", "c", "", 0, 0), KEEL_OK);   /* turn_1 goes */
    ck_assert_int_eq(bus_read(bus, "turn_1", 0, NULL, NULL, NULL, NULL, 0), BUS_UNKNOWN);
    ck_assert_int_eq(bus_open(bus, "turn_5", "c", "", 0, 0), KEEL_EFAIL);
    /* A failed turn keeps its error; expiry forgets finished turns only. */
    bus_finish(bus, "turn_2", NULL, json_pack("{s:i}", "code", 1), 200);
    ck_assert_int_eq(bus_read(bus, "turn_2", 0, NULL, NULL, &error, NULL, 0), BUS_FAILED);
    json_decref(error);
    bus_expire(bus, 200 + 1001);
    ck_assert_int_eq(bus_read(bus, "turn_2", 0, NULL, NULL, NULL, NULL, 0), BUS_UNKNOWN);
    ck_assert_int_eq(bus_read(bus, "turn_3", 0, NULL, NULL, NULL, NULL, 0), BUS_QUEUED);
    bus_free(bus);
}
END_TEST

/* A quiet turn keeps no events, not even its `done`; its result is the
 * ?wait=1 body as a worker wrote it (order built, reals to 10 digits).
 * A failed turn's `error` event is appended by bus_finish. An event's
 * SSE text splits back into its number, name and data. */
START_TEST(test_bus_quiet_turns_and_frames)
{
    struct bus *bus = bus_new(8, 1000, NULL, NULL);
    json_t *events = NULL, *result = NULL;
    char *text, name[16];
    const char *data;
    size_t len = 0, data_len = 0;
    long id = 0;

    ck_assert_int_eq(bus_open(bus, "turn_q", "c", "", 1, 0), KEEL_OK);
    bus_finish(bus, "turn_q", json_pack("{s:s, s:f}", "z", "last", "a", 0.1), NULL, 10);
    ck_assert_int_eq(bus_read(bus, "turn_q", 0, &events, &result, NULL, NULL, 0), BUS_DONE);
    ck_assert_uint_eq(json_array_size(events), 0);
    ck_assert_str_eq(json_string_value(json_object_get(result, "z")), "last");
    json_decref(events);
    json_decref(result);
    text = bus_result_text(bus, "turn_q", 1, &len);
    ck_assert_str_eq(text, "{\"z\":\"last\",\"a\":0.1}");
    ck_assert_uint_eq(len, strlen(text));
    keel_free(text);
    ck_assert_ptr_null(bus_result_text(bus, "turn_nope", 1, &len));
    /* a quiet turn that failed keeps its error event: nothing else has it */
    ck_assert_int_eq(bus_open(bus, "turn_qf", "c", "", 1, 0), KEEL_OK);
    bus_finish(bus, "turn_qf", NULL, json_pack("{s:i}", "code", 5), 15);
    ck_assert_int_eq(bus_read(bus, "turn_qf", 0, &events, NULL, NULL, NULL, 0), BUS_FAILED);
    ck_assert_uint_eq(json_array_size(events), 1);
    ck_assert_str_eq(json_string_value(json_array_get(events, 0)),
                     "id: 1\nevent: error\ndata: {\"code\":5}\n\n");
    json_decref(events);

    ck_assert_int_eq(bus_open(bus, "turn_f", "c", "", 0, 0), KEEL_OK);
    ck_assert_int_eq(bus_publish(bus, "turn_f", "stage", json_pack("{s:s}", "m", "a")), 1);
    bus_finish(bus, "turn_f", NULL, json_pack("{s:i, s:s}", "code", 5, "message", "no"), 20);
    ck_assert_int_eq(bus_read(bus, "turn_f", 1, &events, NULL, NULL, NULL, 0), BUS_FAILED);
    ck_assert_uint_eq(json_array_size(events), 1);
    ck_assert_int_eq(bus_frame_parse(json_string_value(json_array_get(events, 0)),
                                     json_string_length(json_array_get(events, 0)), &id, name,
                                     sizeof(name), &data, &data_len),
                     0);
    ck_assert_int_eq(id, 2);
    ck_assert_str_eq(name, "error");
    ck_assert_int_eq((int)data_len, (int)strlen("{\"code\":5,\"message\":\"no\"}"));
    ck_assert(!strncmp(data, "{\"code\":5,\"message\":\"no\"}", data_len));
    ck_assert_ptr_null(bus_result_text(bus, "turn_f", 1, &len));
    json_decref(events);

    text = bus_frame(12, "token", "{}", 2, &len);
    ck_assert_str_eq(text, "id: 12\nevent: token\ndata: {}\n\n");
    ck_assert_int_eq(bus_frame_parse(text, len, &id, name, sizeof(name), &data, &data_len), 0);
    ck_assert_int_eq(id, 12);
    ck_assert_int_eq(bus_frame_parse(text, len, &id, name, 5, &data, &data_len), -1);
    ck_assert_int_eq(bus_frame_parse(text, len - 1, &id, name, sizeof(name), &data, &data_len),
                     -1);
    ck_assert_int_eq(bus_frame_parse("event: x\n", 9, &id, name, sizeof(name), &data,
                                     &data_len),
                     -1);
    keel_free(text);
    bus_free(bus);
}
END_TEST

/* A record bus_open drops is freed by the next bus_finish, not by
 * bus_open (the HTTP loop), and bus_free frees what still waits. */
START_TEST(test_bus_frees_dropped_records_on_finish)
{
    struct bus *bus = bus_new(2, 1000000, count_notify, NULL);
    long live;

    keel_alloc_count_live(1);
    ck_assert_int_eq(bus_open(bus, "turn_1", "c", "", 0, 0), KEEL_OK);
    ck_assert_int_eq(bus_open(bus, "turn_2", "c", "", 0, 0), KEEL_OK);
    bus_finish(bus, "turn_1", json_pack("{s:s}", "answer", "one"), NULL, 10);
    live = keel_alloc_live();
    ck_assert_int_eq(bus_open(bus, "turn_3", "c", "", 0, 0), KEEL_OK);   /* turn_1 goes */
    ck_assert_int_eq(bus_read(bus, "turn_1", 0, NULL, NULL, NULL, NULL, 0), BUS_UNKNOWN);
    ck_assert_int_gt(keel_alloc_live(), live);   /* turn_3 came, turn_1 is not yet freed */
    live = keel_alloc_live();
    bus_finish(bus, "turn_2", json_pack("{s:s}", "answer", "two"), NULL, 20);
    /* turn_2 gained a result and an event; turn_1's record went */
    ck_assert_int_lt(keel_alloc_live(), live);
    ck_assert_int_eq(bus_open(bus, "turn_4", "c", "", 0, 0), KEEL_OK);   /* turn_2 goes */
    bus_free(bus);
    keel_alloc_count_live(0);
}
END_TEST

/* A full bus drops its oldest finished turn, in the order turns finished,
 * also after many finishes (the ring wraps), ids already expired or
 * forgotten are skipped, and running turns are never dropped. */
START_TEST(test_bus_drops_oldest_finished_first)
{
    struct bus *bus = bus_new(4, 1000000, count_notify, NULL);
    char id[32];

    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof(id), "turn_%d", i);
        ck_assert_int_eq(bus_open(bus, id, "c", "", 0, 0), KEEL_OK);
    }
    /* finished in the order 2, 0, 3; turn_1 keeps running */
    bus_finish(bus, "turn_2", json_object(), NULL, 10);
    bus_finish(bus, "turn_0", json_object(), NULL, 20);
    bus_finish(bus, "turn_3", json_object(), NULL, 30);
    ck_assert_int_eq(bus_open(bus, "turn_4", "c", "", 0, 0), KEEL_OK);   /* turn_2 goes */
    ck_assert_int_eq(bus_read(bus, "turn_2", 0, NULL, NULL, NULL, NULL, 0), BUS_UNKNOWN);
    ck_assert_int_eq(bus_read(bus, "turn_0", 0, NULL, NULL, NULL, NULL, 0), BUS_DONE);
    bus_forget_conversation(bus, "c");   /* turn_0 and turn_3 go; their ids stay in the ring */
    ck_assert_int_eq(bus_open(bus, "turn_5", "c", "", 0, 0), KEEL_OK);
    ck_assert_int_eq(bus_open(bus, "turn_6", "c", "", 0, 0), KEEL_OK);
    /* full of running turns: nothing to drop */
    ck_assert_int_eq(bus_open(bus, "turn_7", "c", "", 0, 0), KEEL_EFAIL);
    /* Many turns later the ring has wrapped several times. */
    for (int i = 8; i < 200; i++) {
        char prev[32];
        snprintf(prev, sizeof(prev), "turn_%d", i == 8 ? 4 : i - 1);
        bus_finish(bus, prev, json_object(), NULL, 100 + i);
        snprintf(id, sizeof(id), "turn_%d", i);
        ck_assert_int_eq(bus_open(bus, id, "c", "", 0, 0), KEEL_OK);
    }
    /* each new turn dropped the one finished just before */
    ck_assert_int_eq(bus_read(bus, "turn_198", 0, NULL, NULL, NULL, NULL, 0), BUS_UNKNOWN);
    ck_assert_int_eq(bus_read(bus, "turn_199", 0, NULL, NULL, NULL, NULL, 0), BUS_QUEUED);
    bus_finish(bus, "turn_199", json_object(), NULL, 500);
    bus_finish(bus, "turn_5", json_object(), NULL, 600);
    ck_assert_int_eq(bus_open(bus, "turn_200", "c", "", 0, 0), KEEL_OK);   /* turn_199 goes */
    ck_assert_int_eq(bus_read(bus, "turn_199", 0, NULL, NULL, NULL, NULL, 0), BUS_UNKNOWN);
    ck_assert_int_eq(bus_read(bus, "turn_5", 0, NULL, NULL, NULL, NULL, 0), BUS_DONE);
    ck_assert_int_eq(bus_read(bus, "turn_1", 0, NULL, NULL, NULL, NULL, 0), BUS_QUEUED);
    ck_assert_int_eq(bus_read(bus, "turn_6", 0, NULL, NULL, NULL, NULL, 0), BUS_QUEUED);
    bus_free(bus);
}
END_TEST

START_TEST(test_tokens_and_hashes)
{
    char a[AUTH_TOKEN_MAX], b[AUTH_TOKEN_MAX], hash[AUTH_HASH_MAX];
    struct keel_error err;

    ck_assert_int_eq(auth_token_new(a, sizeof(a), &err), KEEL_OK);
    ck_assert_int_eq(auth_token_new(b, sizeof(b), &err), KEEL_OK);
    ck_assert(!strncmp(a, "keel_", 5));
    ck_assert_uint_eq(strlen(a), 45);
    ck_assert_str_ne(a, b);
    ck_assert_uint_eq(strspn(a + 5, "abcdefghijklmnopqrstuvwxyz234567"), 40);
    /* SHA-256 of "abc" (FIPS 180-2) */
    auth_token_hash("abc", hash);
    ck_assert_str_eq(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_int_eq(auth_token_new(a, 8, &err), KEEL_EINVAL);
}
END_TEST

static struct pipeline *open_pack(const char *pack, struct store **store)
{
    char dir[4200];
    struct pipeline_options o = {.packs_dir = dir, .pack = pack, .llm = {"none", NULL, NULL},
                                 .websearch_url = "none"};
    struct pipeline *pl = NULL;
    struct keel_error err;

    snprintf(dir, sizeof(dir), "%s/packs", unit_root());
    ck_assert_int_eq(store_open("mem:", store, &err), KEEL_OK);
    o.store = *store;
    ck_assert_msg(pipeline_new(&o, &pl, &err) == KEEL_OK, "%s", err.message);
    return pl;
}

START_TEST(test_api_roles_map_onto_pack_roles)
{
    struct store *store;
    struct pipeline *pl = open_pack("scholar", &store);

    ck_assert_str_eq(pipeline_role_for(pl, "viewer"), "viewer");   /* the pack's own */
    ck_assert_str_eq(pipeline_role_for(pl, "owner"), "owner");
    pipeline_free(pl);
    store_close(store);
    pl = open_pack("payer", &store);
    ck_assert_str_eq(pipeline_role_for(pl, "viewer"), "member");   /* first read-only */
    ck_assert_str_eq(pipeline_role_for(pl, "editor"), "member");   /* the default */
    pipeline_free(pl);
    store_close(store);
}
END_TEST

Suite *suite_server(void)
{
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("server_parts");

    unit_leak_fixture(tc);
    tcase_add_test(tc, test_queue_keeps_a_conversation_in_order);
    tcase_add_test(tc, test_queue_capacity_and_free);
    tcase_add_test(tc, test_bus_frees_dropped_records_on_finish);
    tcase_add_test(tc, test_queue_pop_waits_for_a_job);
    tcase_add_test(tc, test_bus_numbers_events_and_keeps_results);
    tcase_add_test(tc, test_bus_quiet_turns_and_frames);
    tcase_add_test(tc, test_bus_drops_oldest_finished_first);
    tcase_add_test(tc, test_tokens_and_hashes);
    tcase_add_test(tc, test_api_roles_map_onto_pack_roles);
    suite_add_tcase(s, tc);
    return s;
}
