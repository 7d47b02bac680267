//! Hostile input to the loader: huge mappings, alias bombs, special files. Inputs are generated
//! here; nothing large is committed.

use muster_manifest::{Object, load_str};

#[test]
fn a_pod_with_100k_labels_loads() {
    let n = 100_000;
    let mut text = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n");
    for i in 0..n {
        text += &format!("    example.com/key-{i}: v{i}\n");
    }
    text += "spec:\n  containers: []\n";
    let m = load_str("labels.yaml", &text).unwrap();
    let Object::Pod(p) = &m.objects[0].object else { panic!("a pod") };
    assert_eq!(p.metadata.labels.as_ref().unwrap().len(), n);
    // A duplicate among them is still reported where it is, naming the first.
    let dup = text.replace("spec:\n", &format!("    example.com/key-{}: again\nspec:\n", n / 2));
    let e = load_str("labels.yaml", &dup).unwrap_err();
    assert_eq!(
        e[0].to_string(),
        format!(
            "labels.yaml:{}:5: invalid YAML: duplicate key \"example.com/key-{}\" (first at line {})",
            n + 6,
            n / 2,
            n / 2 + 6
        )
    );
}

#[test]
fn an_alias_bomb_of_bytes_is_refused_with_file_and_line() {
    // A 100 KB string aliased 10^5 times: few nodes, 10 GB of text.
    let big = "x".repeat(100_000);
    let mut text =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    a: &a {big}\ndata:\n");
    for i in 0..100_000 {
        text += &format!("  k{i}: *a\n");
    }
    let e = load_str("bomb.yaml", &text).unwrap_err();
    assert_eq!(e.len(), 1);
    // 16 times the input: the first alias past the budget is named.
    let budget = text.len() * 16;
    let line = budget / 100_000 + 1 + 7;
    assert_eq!(
        e[0].to_string(),
        format!(
            "bomb.yaml:{line}:{}: invalid YAML: aliases expand to more than {budget} bytes of text (16 times the input, \
             at least 4 MiB, at most 64 MiB); this alias copies 100000 bytes",
            (line - 8).to_string().len() + 6
        )
    );
}
