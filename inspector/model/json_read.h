/*
 * Typed members of a parsed cJSON object: the one reader behind every JSON input of hangdx
 * (snapshots, trace lines, py-spy --json, the log patterns). The writers' constructors are
 * jsonout.h's.
 *
 * Every getter takes:
 *   o     the object (borrowed). NULL, or a value that is not an object, has no members: every
 *         key is absent;
 *   key   the member's name, compared case-sensitively (cJSON_GetObjectItemCaseSensitive);
 *   out   where the value goes; written only when the getter returns 1;
 *   why   NULL, or a caller-owned hdx_json_error (a stack variable does) that a getter
 *         returning a negative code fills with a sentence for a person, naming the key:
 *         "\"pid\" should be an integer from 1 to 2147483647". The caller puts where (file,
 *         line, path in the document) in front. Left untouched on 1 and 0.
 * and returns:
 *    1        present, of the type asked (and in range): *out is set;
 *    0        absent: no such member, or the member is JSON null (hangdx writes an unknown
 *             value as null);
 *   -EINVAL   present, but of another type, or out of range;
 *   -ENOMEM   (the copying getters only) out of memory; why says "out of memory".
 * None of them keeps a pointer into o beyond the call, except where it returns one: borrowed
 * pointers are valid as long as the cJSON tree is.
 */
#ifndef HDX_JSON_READ_H
#define HDX_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* The text of a refusal; a key too long for it is cut. */
typedef struct hdx_json_error {
    char text[192];
} hdx_json_error;

/*
 * The member key of o, borrowed; NULL when absent or JSON null. No type check, no error: for
 * the callers that take several types (a hex string or a number, say).
 */
const struct cJSON *hdx_json_member(const struct cJSON *o, const char *key);

/*
 * An integral JSON number in [min, max] (min <= max) into *out. A fraction (1.5), a non-finite
 * number or a value out of range is -EINVAL: "\"key\" should be an integer from MIN to MAX".
 * Exact to 2^53, as every JSON number cJSON reads is a double.
 */
int hdx_json_get_i64(const struct cJSON *o, const char *key, int64_t min, int64_t max, int64_t *out,
                     hdx_json_error *why);

/* The same for an int. */
int hdx_json_get_int(const struct cJSON *o, const char *key, int min, int max, int *out, hdx_json_error *why);

/* A finite JSON number. Else -EINVAL: "\"key\" should be a number". */
int hdx_json_get_num(const struct cJSON *o, const char *key, double *out, hdx_json_error *why);

/* true or false, as 1 or 0. Else -EINVAL: "\"key\" should be true, false or null". */
int hdx_json_get_bool(const struct cJSON *o, const char *key, int *out, hdx_json_error *why);

/* A JSON string, borrowed from the tree. Else -EINVAL: "\"key\" should be a string". */
int hdx_json_get_str(const struct cJSON *o, const char *key, const char **out, hdx_json_error *why);

/*
 * A JSON string, copied: *out is a new heap string the caller frees (any string *out held
 * before is not freed). -EINVAL as hdx_json_get_str; -ENOMEM.
 */
int hdx_json_get_strdup(const struct cJSON *o, const char *key, char **out, hdx_json_error *why);

/*
 * An array of strings, appended as heap copies to the caller's array *v of *n strings: NULL and
 * 0, or an array made by hdx_append (util.h), which grows it. The caller frees each string and
 * the array. -EINVAL when it is not an array or holds anything but strings: "\"key\" should be
 * an array of strings"; -ENOMEM. On an error nothing is appended (*n as it was; *v may have
 * been moved by a reallocation, and is still the caller's).
 */
int hdx_json_get_strv(const struct cJSON *o, const char *key, char ***v, size_t *n, hdx_json_error *why);

/* A JSON object / array, borrowed. Else -EINVAL: "\"key\" should be an object" / "... an array". */
int hdx_json_get_object(const struct cJSON *o, const char *key, const struct cJSON **out, hdx_json_error *why);
int hdx_json_get_array(const struct cJSON *o, const char *key, const struct cJSON **out, hdx_json_error *why);

/*
 * The same checks for a member c already found (by hdx_json_member, or a reader's own look-up
 * that gives NULL for an absent or JSON null member, as it does), key naming it in messages: each
 * hdx_json_get_X(o, key, ...) is hdx_json_X_value(hdx_json_member(o, key), key, ...).
 */
int hdx_json_i64_value(const struct cJSON *c, const char *key, int64_t min, int64_t max, int64_t *out,
                       hdx_json_error *why);
int hdx_json_num_value(const struct cJSON *c, const char *key, double *out, hdx_json_error *why);
int hdx_json_bool_value(const struct cJSON *c, const char *key, int *out, hdx_json_error *why);
int hdx_json_str_value(const struct cJSON *c, const char *key, const char **out, hdx_json_error *why);
int hdx_json_object_value(const struct cJSON *c, const char *key, const struct cJSON **out, hdx_json_error *why);
int hdx_json_array_value(const struct cJSON *c, const char *key, const struct cJSON **out, hdx_json_error *why);

#endif
