/*
 * artifact_int.h — what the files of src/artifact/ share: the contract
 * tables (contract.c) the validator (validate.c) walks, and the text
 * helpers the builders and the distiller use.
 */
#ifndef KEEL_ARTIFACT_INT_H
#define KEEL_ARTIFACT_INT_H

#include "artifact/artifact.h"

enum contract_kind { CF_STRING, CF_INT, CF_NUMBER, CF_OBJECT, CF_LIST };

/* One field of a contract. Strings: min..max bytes; integers and numbers:
 * min..max value; lists: min..max items, `children` is the one item's
 * spec; objects: `children` lists the keys, ended by a NULL name. */
struct contract_field {
    const char *name;
    enum contract_kind kind;
    int required;
    long long min, max;
    const struct contract_field *children;
};

/* The envelope every artifact shares (id, type, version, …, content). */
extern const struct contract_field contract_envelope[];

/* The content fields of contract `type`. */
const struct contract_field *contract_content(int type);

/* The contract's own rules across fields (citations name sources the
 * brief has, items name its documents, steps numbered from 1). KEEL_OK
 * or KEEL_EINVAL naming the field. `content` has passed the tables. */
int contract_check_refs(int type, const json_t *content, struct keel_error *err);

/* Caps of the contracts' lists, shared with the builders. */
#define CONTRACT_SOURCES_MAX 50
#define CONTRACT_ITEMS_MAX 20
#define CONTRACT_EXTRA_MAX 8
#define CONTRACT_TEXT_MAX 2048
#define CONTRACT_TITLE_MAX 200

#endif
