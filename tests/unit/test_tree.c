/*
 * test_tree.c - the path tree: implicit directories, sorted children,
 * lookups, inode numbers that are the same for the same catalog (and for
 * the same catalog in another order), and the `listed` mask.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "catalog.h"
#include "tree.h"

#define SRC "\"sources\": [{\"url\": \"http://h.example/x\"}]"
#define ASSET(id, path) "{\"id\": \"" id "\", \"path\": \"" path "\", " SRC "}"

/* Assets 0..4 in catalog order. */
static const char catalog_text[] =
	"{\"assets\": [\n"
	"  " ASSET("b", "z.bin") ",\n"
	"  " ASSET("a", "dir/sub/x.bin") ",\n"
	"  " ASSET("c", "dir/a.bin") ",\n"
	"  " ASSET("d", "dir/sub/Y.bin") ",\n"
	"  " ASSET("e", "other/e.bin") "\n"
	"]}";

/* The same assets, another order. */
static const char catalog_reordered[] =
	"{\"assets\": [\n"
	"  " ASSET("e", "other/e.bin") ",\n"
	"  " ASSET("d", "dir/sub/Y.bin") ",\n"
	"  " ASSET("c", "dir/a.bin") ",\n"
	"  " ASSET("a", "dir/sub/x.bin") ",\n"
	"  " ASSET("b", "z.bin") "\n"
	"]}";

static struct px_catalog *load(const char *text)
{
	char err[512] = "";
	struct px_catalog *cat = NULL;
	if (px_catalog_parse("t.json", text, strlen(text), &cat, err, sizeof(err)) != PX_OK)
		fail_msg("catalog: %s", err);
	return cat;
}

static struct px_tree *build(const struct px_catalog *cat, const unsigned char *listed)
{
	struct px_tree *t = NULL;
	assert_int_equal(px_tree_new(cat, listed, &t), PX_OK);
	assert_non_null(t);
	return t;
}

/* The node at a '/'-separated path from the root, or NULL. */
static const struct px_tree_node *walk(const struct px_tree *t, const char *path)
{
	char buf[512];
	const struct px_tree_node *n = px_tree_get(t, PX_TREE_ROOT);
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c && n;
	     c = strtok_r(NULL, "/", &save))
		n = px_tree_lookup(t, n->ino, c);
	return n;
}

static void expect_children(const struct px_tree *t, uint64_t dir, const char *const *names,
			    size_t count)
{
	const struct px_tree_node *const *kids = NULL;
	size_t n = px_tree_children(t, dir, &kids);
	assert_int_equal(n, count);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(kids[i]->name, names[i]);
		assert_int_equal(kids[i]->parent, dir);
		assert_ptr_equal(px_tree_get(t, kids[i]->ino), kids[i]);
	}
}

static void test_root(void **state)
{
	struct px_catalog *cat = load(catalog_text);
	struct px_tree *t = build(cat, NULL);
	const struct px_tree_node *root = px_tree_get(t, PX_TREE_ROOT);
	assert_int_equal(PX_TREE_ROOT, 1);
	assert_non_null(root);
	assert_int_equal(root->ino, 1);
	assert_int_equal(root->parent, 1);
	assert_string_equal(root->name, "");
	assert_int_equal(root->asset, -1);
	/* root + 5 files + dir, dir/sub, other */
	assert_int_equal(px_tree_count(t), 9);
	px_tree_free(t);
	px_catalog_free(cat);
}

static void test_lookups_and_children(void **state)
{
	struct px_catalog *cat = load(catalog_text);
	struct px_tree *t = build(cat, NULL);

	static const char *const top[] = { "dir", "other", "z.bin" };
	expect_children(t, PX_TREE_ROOT, top, 3);

	const struct px_tree_node *dir = px_tree_lookup(t, PX_TREE_ROOT, "dir");
	assert_non_null(dir);
	assert_int_equal(dir->asset, -1);
	assert_int_equal(dir->parent, PX_TREE_ROOT);
	assert_string_equal(dir->name, "dir");
	static const char *const in_dir[] = { "a.bin", "sub" };
	expect_children(t, dir->ino, in_dir, 2);

	const struct px_tree_node *sub = px_tree_lookup(t, dir->ino, "sub");
	assert_non_null(sub);
	assert_int_equal(sub->asset, -1);
	assert_int_equal(sub->parent, dir->ino);
	/* byte order: 'Y' (0x59) before 'x' */
	static const char *const in_sub[] = { "Y.bin", "x.bin" };
	expect_children(t, sub->ino, in_sub, 2);

	const struct px_tree_node *x = px_tree_lookup(t, sub->ino, "x.bin");
	assert_non_null(x);
	assert_int_equal(x->asset, 1);
	assert_int_equal(x->parent, sub->ino);
	assert_ptr_equal(walk(t, "dir/sub/x.bin"), x);

	const struct px_tree_node *z = walk(t, "z.bin");
	assert_non_null(z);
	assert_int_equal(z->asset, 0);
	assert_int_equal(z->parent, PX_TREE_ROOT);
	assert_int_equal(walk(t, "dir/a.bin")->asset, 2);
	assert_int_equal(walk(t, "dir/sub/Y.bin")->asset, 3);
	assert_int_equal(walk(t, "other/e.bin")->asset, 4);

	/* misses */
	assert_null(px_tree_lookup(t, PX_TREE_ROOT, "nope"));
	assert_null(px_tree_lookup(t, PX_TREE_ROOT, "x.bin"));
	assert_null(px_tree_lookup(t, PX_TREE_ROOT, ""));
	assert_null(px_tree_lookup(t, PX_TREE_ROOT, "dir/a.bin"));
	assert_null(px_tree_lookup(t, sub->ino, "X.bin"));
	assert_null(px_tree_lookup(t, z->ino, "anything"));   /* a file */
	assert_null(px_tree_lookup(t, 0, "dir"));             /* no such inode */
	assert_null(walk(t, "dir/sub/x.bin/more"));

	/* a file has no children; an unknown inode neither */
	const struct px_tree_node *const *kids = (const void *)&kids;
	assert_int_equal(px_tree_children(t, z->ino, &kids), 0);
	assert_int_equal(px_tree_children(t, 12345, &kids), 0);
	assert_null(px_tree_get(t, 0));
	assert_null(px_tree_get(t, 12345));

	px_tree_free(t);
	px_catalog_free(cat);
}

/* Every node reachable from the root, each exactly once, and consistent. */
static size_t check_consistent(const struct px_tree *t, uint64_t dir, size_t depth)
{
	const struct px_tree_node *const *kids;
	size_t n = px_tree_children(t, dir, &kids), seen = 1;
	assert_true(depth < 64);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(kids[i]->parent, dir);
		assert_true(kids[i]->ino > PX_TREE_ROOT);
		if (i > 0)
			assert_true(strcmp(kids[i - 1]->name, kids[i]->name) < 0);
		assert_ptr_equal(px_tree_lookup(t, dir, kids[i]->name), kids[i]);
		seen += kids[i]->asset >= 0 ? 1 : check_consistent(t, kids[i]->ino, depth + 1);
	}
	return seen;
}

static void test_file_inode_is_asset_ino(void **state)
{
	struct px_catalog *cat = load(catalog_text);
	struct px_tree *t = build(cat, NULL);
	static const char *const paths[] = { "z.bin", "dir/sub/x.bin", "dir/a.bin",
		"dir/sub/Y.bin", "other/e.bin" };
	for (size_t i = 0; i < 5; i++) {
		const struct px_tree_node *n = walk(t, paths[i]);
		assert_non_null(n);
		assert_int_equal(n->asset, (long)i);
		assert_int_equal(n->ino, px_tree_asset_ino(cat->assets[i].id));
	}
	/* the function is a pure function of the id: of its bytes, not of where
	 * they are (the same literal twice may be one object: compare with a
	 * copy elsewhere) */
	char *a_copy = strdup("a");
	assert_non_null(a_copy);
	uint64_t ino_a = px_tree_asset_ino("a");
	assert_int_equal(px_tree_asset_ino(a_copy), ino_a);
	free(a_copy);
	assert_int_not_equal(px_tree_asset_ino("a"), px_tree_asset_ino("b"));
	assert_true(px_tree_asset_ino("a") > PX_TREE_ROOT);
	assert_int_equal(check_consistent(t, PX_TREE_ROOT, 0), px_tree_count(t));
	px_tree_free(t);
	px_catalog_free(cat);
}

static void collect(const struct px_tree *t, const char *path, uint64_t *out)
{
	const struct px_tree_node *n = walk(t, path);
	assert_non_null(n);
	*out = n->ino;
}

static void test_inodes_stable(void **state)
{
	static const char *const paths[] = { "dir", "dir/sub", "other", "z.bin",
		"dir/sub/x.bin", "dir/a.bin", "dir/sub/Y.bin", "other/e.bin" };
	enum { N = sizeof(paths) / sizeof(paths[0]) };
	uint64_t first[N], again[N], reordered[N];

	struct px_catalog *c1 = load(catalog_text);
	struct px_catalog *c2 = load(catalog_text);
	struct px_catalog *c3 = load(catalog_reordered);
	struct px_tree *t1 = build(c1, NULL);
	struct px_tree *t2 = build(c2, NULL);
	struct px_tree *t3 = build(c3, NULL);
	for (size_t i = 0; i < N; i++) {
		collect(t1, paths[i], &first[i]);
		collect(t2, paths[i], &again[i]);
		collect(t3, paths[i], &reordered[i]);
		assert_int_equal(first[i], again[i]);
		assert_int_equal(first[i], reordered[i]);
		for (size_t k = 0; k < i; k++)
			assert_int_not_equal(first[i], first[k]);
	}
	/* a file keeps its inode when the catalog loses another file, and its
	 * directory keeps its own */
	unsigned char listed[5] = { 1, 1, 1, 0, 1 };
	struct px_tree *t4 = build(c1, listed);
	assert_int_equal(walk(t4, "dir/sub/x.bin")->ino, first[4]);
	assert_int_equal(walk(t4, "dir/sub")->ino, first[1]);
	px_tree_free(t1);
	px_tree_free(t2);
	px_tree_free(t3);
	px_tree_free(t4);
	px_catalog_free(c1);
	px_catalog_free(c2);
	px_catalog_free(c3);
}

static void test_listed_mask(void **state)
{
	struct px_catalog *cat = load(catalog_text);

	/* leave out z.bin and the only file of other/: "other" goes too */
	unsigned char listed[5] = { 0, 1, 1, 1, 0 };
	struct px_tree *t = build(cat, listed);
	static const char *const top[] = { "dir" };
	expect_children(t, PX_TREE_ROOT, top, 1);
	assert_null(walk(t, "z.bin"));
	assert_null(walk(t, "other"));
	assert_non_null(walk(t, "dir/sub/x.bin"));
	assert_int_equal(px_tree_count(t), 6); /* root, dir, sub, 3 files */
	assert_int_equal(check_consistent(t, PX_TREE_ROOT, 0), 6);
	px_tree_free(t);

	/* leave out both files of dir/sub: sub goes, dir stays */
	unsigned char listed2[5] = { 1, 0, 1, 0, 1 };
	t = build(cat, listed2);
	const struct px_tree_node *dir = walk(t, "dir");
	assert_non_null(dir);
	static const char *const in_dir[] = { "a.bin" };
	expect_children(t, dir->ino, in_dir, 1);
	assert_null(walk(t, "dir/sub"));
	assert_int_equal(px_tree_count(t), 6); /* root, dir, other, 3 files */
	px_tree_free(t);

	/* nothing listed: the root alone */
	unsigned char none[5] = { 0 };
	t = build(cat, none);
	const struct px_tree_node *const *kids;
	assert_int_equal(px_tree_children(t, PX_TREE_ROOT, &kids), 0);
	assert_int_equal(px_tree_count(t), 1);
	assert_non_null(px_tree_get(t, PX_TREE_ROOT));
	px_tree_free(t);
	px_catalog_free(cat);
}

static void test_empty_catalog(void **state)
{
	struct px_catalog *cat = load("{\"assets\": []}");
	struct px_tree *t = build(cat, NULL);
	assert_int_equal(px_tree_count(t), 1);
	const struct px_tree_node *const *kids;
	assert_int_equal(px_tree_children(t, PX_TREE_ROOT, &kids), 0);
	assert_null(px_tree_lookup(t, PX_TREE_ROOT, "x"));
	px_tree_free(t);
	px_catalog_free(cat);
	px_tree_free(NULL);
}

/* Many files over many directories: every one found, sorted, unique. */
static void test_many(void **state)
{
	enum { NA = 600 };
	size_t cap = NA * 120 + 64, len = 0;
	char *text = malloc(cap);
	assert_non_null(text);
	len += (size_t)snprintf(text + len, cap - len, "{\"assets\": [");
	for (int i = 0; i < NA; i++)
		len += (size_t)snprintf(text + len, cap - len,
					"%s{\"id\": \"id%d\", \"path\": \"d%d/e%d/f%04d\", " SRC "}",
					i ? "," : "", i, i % 7, i % 13, (NA - i) * 7 % 1000);
	len += (size_t)snprintf(text + len, cap - len, "]}");
	assert_true(len < cap);
	struct px_catalog *cat = load(text);
	struct px_tree *t = build(cat, NULL);
	free(text);

	for (int i = 0; i < NA; i++) {
		char path[64];
		snprintf(path, sizeof(path), "d%d/e%d/f%04d", i % 7, i % 13, (NA - i) * 7 % 1000);
		const struct px_tree_node *n = walk(t, path);
		assert_non_null(n);
		assert_int_equal(n->asset, i);
	}
	/* 7 top directories; each d holds every e that some i reaches */
	const struct px_tree_node *const *kids;
	assert_int_equal(px_tree_children(t, PX_TREE_ROOT, &kids), 7);
	size_t dirs = 0;
	for (int d = 0; d < 7; d++)
		for (int e = 0; e < 13; e++)
			for (int i = 0; i < NA; i++)
				if (i % 7 == d && i % 13 == e) {
					dirs++;
					break;
				}
	assert_int_equal(px_tree_count(t), 1 + 7 + dirs + NA);
	assert_int_equal(check_consistent(t, PX_TREE_ROOT, 0), px_tree_count(t));
	px_tree_free(t);
	px_catalog_free(cat);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root),
		cmocka_unit_test(test_lookups_and_children),
		cmocka_unit_test(test_file_inode_is_asset_ino),
		cmocka_unit_test(test_inodes_stable),
		cmocka_unit_test(test_listed_mask),
		cmocka_unit_test(test_empty_catalog),
		cmocka_unit_test(test_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
