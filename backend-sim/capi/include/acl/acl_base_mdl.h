/*
 * acl/acl_base_mdl.h — empty, as in CANN 9.1.0's runtime package: what it would declare,
 * the model base types, comes with another CANN package, which acl-notify does not provide. It
 * exists because acl/acl_base.h includes it.
 */
