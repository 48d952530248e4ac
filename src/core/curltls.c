/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS policy of kop's libcurl handles (see kop/curltls.h).
 */
#include "kop/curltls.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>

int kop_curltls_setup(CURL *e)
{
    assert(e);
    /* client-go's floor (its transport's tls.Config has MinVersion TLS
     * 1.2); no ceiling, so TLS 1.3 is used where the backend has it. */
    if (curl_easy_setopt(e, CURLOPT_SSLVERSION,
                         (long)(CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_DEFAULT)) != CURLE_OK)
        return -EINVAL;
    return 0;
}
