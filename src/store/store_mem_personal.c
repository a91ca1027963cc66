/*
 * store_mem_personal.c — personal facts in the in-memory backend, as
 * the SQLite store keeps them (migration 10): {user: {key: {value, kind,
 * created_ms, updated_ms, conversation_id}}}. A change is built whole on
 * a copy of the user's facts (prepare) and swapped in only once the turn
 * is saved (commit, which cannot fail), so a turn and its fact are stored
 * together or not at all.
 */
#include <string.h>

#include "core/alloc.h"
#include "store/store_mem_int.h"

int mem_personal_prepare(json_t **facts, const struct store_personal_change *c, json_t **copy,
                         struct keel_error *err)
{
    json_t *users = *facts, *mine, *old, *row;
    long failures = keel_alloc_failures();

    *copy = NULL;
    if (!users && !(users = *facts = json_object()))
        return keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
    mine = json_object_get(users, c->user);
    if (!(*copy = json_is_object(mine) ? json_deep_copy(mine) : json_object()))
        return keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
    if (!c->value) {
        json_object_del(*copy, c->key);
    } else {
        old = json_object_get(*copy, c->key);
        row = json_pack("{s:s, s:s, s:I, s:I, s:s?}", "value", c->value, "kind", c->kind,
                        "created_ms",
                        old ? json_integer_value(json_object_get(old, "created_ms"))
                            : (json_int_t)c->ts_ms,
                        "updated_ms", (json_int_t)c->ts_ms, "conversation_id",
                        c->conversation_id);
        if (!row || json_object_set_new(*copy, c->key, row))
            failures = -1;
    }
    /* jansson's copies skip keys they cannot add: nothing built during a
     * failed allocation is kept. The user's key is reserved now, so the
     * commit only replaces a value and cannot fail. */
    if (failures < 0 || keel_alloc_failures() != failures ||
        (!mine && json_object_set_new(users, c->user, json_null()))) {
        json_decref(*copy);
        *copy = NULL;
        return keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
    }
    return KEEL_OK;
}

void mem_personal_commit(json_t *facts, const char *user, json_t *copy)
{
    /* The key exists: replaced through an iterator, which allocates
     * nothing (json_object_set_new may grow the table even then). */
    json_object_iter_set_new(facts, json_object_iter_at(facts, user), copy);
}

int mem_personal_list(const json_t *facts, const char *user, json_t **out,
                      struct keel_error *err)
{
    json_t *mine = json_object_get(facts, user), *list = json_array(), *row;
    const char *keys[STORE_PERSONAL_FACTS_MAX];
    size_t n = 0;
    const char *key;

    if (!list)
        return keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
    json_object_foreach(json_is_object(mine) ? mine : NULL, key, row)
        if (n < STORE_PERSONAL_FACTS_MAX)
            keys[n++] = key;
    /* By key, as SQLite orders them (bytewise). */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && strcmp(keys[k - 1], keys[k]) > 0; k--) {
            const char *tmp = keys[k];
            keys[k] = keys[k - 1];
            keys[k - 1] = tmp;
        }
    for (size_t i = 0; i < n; i++) {
        row = json_object_get(mine, keys[i]);
        if (json_array_append_new(list, json_pack("{s:s, s:O, s:O, s:O, s:O, s:O?}", "key",
                                                  keys[i], "value",
                                                  json_object_get(row, "value"), "kind",
                                                  json_object_get(row, "kind"), "created_ms",
                                                  json_object_get(row, "created_ms"),
                                                  "updated_ms",
                                                  json_object_get(row, "updated_ms"),
                                                  "conversation_id",
                                                  json_object_get(row, "conversation_id")))) {
            json_decref(list);
            return keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
        }
    }
    *out = list;
    return KEEL_OK;
}

int mem_personal_stats(const json_t *facts, json_t **out, struct keel_error *err)
{
    json_int_t users = 0, n_facts = 0, notes = 0;
    const char *user, *key;
    json_t *mine, *row;

    json_object_foreach((json_t *)facts, user, mine) {
        users += json_object_size(mine) > 0;
        json_object_foreach(mine, key, row) {
            if (!strcmp(json_string_value(json_object_get(row, "kind")), "note"))
                notes++;
            else
                n_facts++;
        }
    }
    *out = json_pack("{s:I, s:I, s:I}", "users", users, "facts", n_facts, "notes", notes);
    return *out ? KEEL_OK : keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
}
