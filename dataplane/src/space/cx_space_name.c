/* Validation of space names; see cx_space_name.h. */
#include "space/cx_space_name.h"

#include "common/cx_error.h"

#include <string.h>

static int is_alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int cx_space_name_check(const char *name)
{
    if (!name)
        return cx_err_set(EINVAL, "name is missing");
    size_t n = strnlen(name, CX_SPACE_NAME_MAX + 1);
    if (n == 0)
        return cx_err_set(EINVAL, "name is empty");
    if (n > CX_SPACE_NAME_MAX)
        return cx_err_set(EINVAL, "name '%.32s...' is longer than %d bytes", name,
                          CX_SPACE_NAME_MAX);
    if (!is_alnum((unsigned char)name[0]))
        return cx_err_set(EINVAL, "name '%s' must start with a letter or digit", name);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!(is_alnum(c) || c == '.' || c == '_' || c == ':' || c == '-'))
            return cx_err_set(EINVAL,
                              "name '%s' has a character not in [A-Za-z0-9._:-] at byte %zu",
                              name, i);
    }
    return 0;
}
