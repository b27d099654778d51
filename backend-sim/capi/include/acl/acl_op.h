/*
 * acl/acl_op.h — empty, as in CANN 9.1.0's runtime package: what it would declare,
 * the single-operator API (aclop*), comes with another CANN package, which acl-notify does not provide. It
 * exists because acl/acl.h includes it.
 */
