/* SPDX-License-Identifier: Apache-2.0 */
/* probe_b.c: the definition that RTLD_NEXT from probe_a must find. */
int probe_value(void)
{
    return 2;
}
