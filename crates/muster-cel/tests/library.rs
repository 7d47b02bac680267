//! The CEL environment function by function, on a realistic H100 device
//! (dra-driver-nvidia-gpu v0.4 attributes, landscape.md §4.1).

use k8s_openapi::api::resource::v1::Device;
use muster_cel::{DeviceView, Env};
use serde_json::json;

fn h100() -> DeviceView {
    let d: Device = serde_json::from_value(json!({
        "name": "gpu-0",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": "GPU-81d79b08-40a0-40ae-3fc5-82b8ff8b8138"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.105.8"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:44"},
            "resource.kubernetes.io/numaNode": {"int": 0},
            "partition4": {"int": 1},
            "models": {"strings": ["h100", "h100-sxm"]},
            "ports": {"ints": [1, 2, 3]}
        },
        "capacity": {"memory": {"value": "81559Mi"}, "multiprocessors": {"value": "132"}}
    }))
    .unwrap();
    DeviceView::new("gpu.nvidia.com", &d).unwrap()
}

fn eval(src: &str) -> Result<bool, String> {
    let env = Env::default();
    let p = env.compile(src).map_err(|e| format!("compile: {e}"))?;
    env.eval(&p, &h100()).map_err(|e| e.to_string())
}

#[track_caller]
fn yes(src: &str) {
    assert_eq!(eval(src), Ok(true), "{src}");
}

#[track_caller]
fn no(src: &str) {
    assert_eq!(eval(src), Ok(false), "{src}");
}

#[track_caller]
fn fails(src: &str, msg: &str) {
    match eval(src) {
        Err(e) => assert!(e.contains(msg), "{src}: {e:?} does not contain {msg:?}"),
        Ok(v) => panic!("{src}: expected an error containing {msg:?}, got {v}"),
    }
}

#[test]
fn the_device_variable() {
    yes("device.driver == 'gpu.nvidia.com'");
    yes(r#"device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3""#);
    yes("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:44'");
    yes("device.attributes['resource.kubernetes.io'].numaNode == 0");
    no("device.allowMultipleAllocations");
    yes("'gpu.nvidia.com' in device.attributes && !('other.example.com' in device.attributes)");
    yes("size(device.attributes['no-such-domain']) == 0");
    yes("has(device.attributes.nvidia) == false && has(device.capacity.gpu) == false");
    yes("has(device.attributes['gpu.nvidia.com'].uuid) && !has(device.attributes['gpu.nvidia.com'].nvlink)");
    yes("device.attributes['gpu.nvidia.com'].?nvlink.orValue(false) == false");
    yes("device.attributes['gpu.nvidia.com'][?'type'].hasValue()");
    fails("device.attributes['gpu.nvidia.com'].nvlink", "no such key: nvlink. consider using CEL optional chaining");
    fails("device.attributes['no-such-domain'].noSuchAttr.isGreaterThan(quantity('0'))", "no such key: noSuchAttr");
    fails("device.nosuchfield == 1", "compile: compilation failed: ERROR: <input>:1:7: undefined field 'nosuchfield'");
    fails(
        "device.attributes['gpu.nvidia.com'].productName",
        "CEL result of type string could not be converted to bool",
    );
}

#[test]
fn quantities() {
    // H100 80GB reports 81559Mi, which is less than 80Gi: a `>= 80Gi` selector matches no H100.
    no("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0");
    yes("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0");
    yes("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))");
    yes("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('80Gi'))");
    yes("quantity('1.5Gi').add(quantity('512Mi')) == quantity('2Gi') && quantity('2').sub(1) == quantity('1')");
    yes("quantity('-3').sign() == -1 && quantity('250m').isInteger() == false && quantity('4k').asInteger() == 4000");
    yes("quantity('250m').asApproximateFloat() == 0.25 && isQuantity('1Gi') && !isQuantity('1GB')");
    yes("device.capacity['gpu.nvidia.com'].multiprocessors == quantity('132')");
    fails("quantity('1GB') == quantity('1G')", "unknown quantity suffix");
    fails(
        "quantity('1') < quantity('2')",
        "found no matching overload for '_<_' applied to '(kubernetes.Quantity, kubernetes.Quantity)'",
    );
    fails("quantity('1').compareTo(1)", "found no matching overload for 'compareTo'");
    fails("quantity('1').asInteger() == 1 && quantity('0.5').asInteger() == 0", "cannot convert value to integer");
}

#[test]
fn semantic_versions() {
    yes("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))");
    yes("device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() == 9");
    yes("device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.105.8')) == 0");
    yes("semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3 && semver('v1.2', true) == semver('1.2.0')");
    yes("isSemver('1.0.0-rc.1') && !isSemver('v1.0.0') && isSemver('v1.0', true)");
    yes("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))");
    fails("semver('01.2.3') == semver('1.2.3')", "invalid semver");
}

#[test]
fn strings_regex_and_lists() {
    yes("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')");
    yes("device.attributes['gpu.nvidia.com'].productName.contains('80GB') && 'HBM3'.lowerAscii() == 'hbm3'");
    yes("device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA H[0-9]+')");
    yes("matches('abc', 'b') && 'a,b,c'.split(',').size() == 3 && ['a', 'b'].join('-') == 'a-b'");
    yes(
        "'hello'.substring(1, 3) == 'el' && 'hello'.charAt(1) == 'e' && 'hello'.indexOf('l') == 2 && 'hello'.lastIndexOf('l') == 3",
    );
    yes(
        "'  x '.trim() == 'x' && 'aaa'.replace('a', 'b', 2) == 'bba' && 'abc'.upperAscii() == 'ABC' && 'abc'.reverse() == 'cba'",
    );
    yes("'gpu-0-mig-1g10gb-19-0'.find('[0-9]+g[0-9]+gb') == '1g10gb' && 'a1b22c333'.findAll('[0-9]+').size() == 3");
    yes("[1, 2, 3].isSorted() && [3, 1, 2].sum() == 6 && [3, 1, 2].min() == 1 && [3, 1, 2].max() == 3");
    yes("[1, 2, 3].indexOf(2) == 1 && [1, 2, 2].lastIndexOf(2) == 2");
    yes("sets.contains([1, 2, 3], [1, 3]) && sets.intersects([1], [1, 5]) && sets.equivalent([1, 2], [2, 1])");
    fails("'abc'.matches('(')", "invalid regular expression");
    fails("'abc'.substring(5) == ''", "index out of range: 5");
}

#[test]
fn list_attributes_and_includes() {
    yes("device.attributes['gpu.nvidia.com'].models.includes('h100')");
    yes("device.attributes['gpu.nvidia.com'].type.includes('gpu')");
    yes("device.attributes['gpu.nvidia.com'].models.exists(m, m.startsWith('h100-'))");
    yes(
        "device.attributes['gpu.nvidia.com'].ports.all(p, p > 0) && device.attributes['gpu.nvidia.com'].ports.exists_one(p, p == 2)",
    );
    yes(
        "device.attributes['gpu.nvidia.com'].ports.map(p, p * 2) == [2, 4, 6] && device.attributes['gpu.nvidia.com'].ports.filter(p, p > 1).size() == 2",
    );
    yes("device.attributes['gpu.nvidia.com'].ports.map(p, p > 1, p * 10) == [20, 30]");
    yes("[10, 20].all(i, v, v == (i + 1) * 10) && {'a': 1}.exists(k, v, k == 'a' && v == 1)");
    fails("device.attributes['gpu.nvidia.com'].partition4.all(x, x > 0)", "got 'types.Int', expected iterable type");
    let long: Vec<String> = (0..60).map(|i| i.to_string()).collect();
    fails(
        &format!("[{}].includes(59)", long.join(", ")),
        "'includes' function cannot be applied to lists longer than 48 values",
    );
    yes(&format!("[{}].includes(3)", long.join(", ")));
    yes("device.attributes.exists_one(d, d == 'resource.kubernetes.io')");
}

#[test]
fn operators_and_error_semantics() {
    yes("1 == 1.0 && 1u == 1 && 2 > 1.5 && -1 < 0u && 3 / 2 == 1 && 7 % 3 == 1 && 2.0 * 3.0 == 6.0");
    yes("'a' + 'b' == 'ab' && [1] + [2] == [1, 2] && b'a' < b'b' && true != false");
    yes("(1 > 2 ? 'x' : 'y') == 'y' && {'k': 1}['k'] == 1 && [1, 2][1] == 2 && 2 in [1, 2] && 'k' in {'k': 1}");
    yes("cel.bind(dra, device.attributes['gpu.nvidia.com'], dra.type == 'gpu' && dra.brand == 'Nvidia')");
    yes("int('42') == 42 && uint(3) == 3u && double(1) == 1.0 && string(12) == '12' && bool('true') && type(1) == int");
    yes(
        "optional.of(1).value() == 1 && !optional.none().hasValue() && optional.none().or(optional.of(2)).value() == 2",
    );
    // An error on one side of && or || is absorbed when the other side decides.
    no("device.attributes['gpu.nvidia.com'].nvlink && false");
    yes("device.attributes['gpu.nvidia.com'].nvlink || true");
    fails("device.attributes['gpu.nvidia.com'].nvlink && true", "no such key: nvlink");
    fails("9223372036854775807 + 1 == 0", "integer overflow");
    fails("1 / 0 == 0", "division by zero");
    fails("[1][5] == 1", "index out of bounds: 5");
    fails("{'a': 1, 'a': 2}.size() == 2", "repeated key");
    fails("1 + 'a' == 2", "found no matching overload for '_+_' applied to '(int, string)'");
    fails(
        "noSuchVar",
        "compile: compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n | noSuchVar\n | ^",
    );
    fails(
        "device.driver == ",
        "compile: compilation failed: ERROR: <input>:1:18: Syntax error: mismatched input '<EOF>'",
    );
    fails("nosuchfunc(1)", "undeclared reference to 'nosuchfunc'");
    fails("1 + 1", "must evaluate to bool or the unknown type, not int");
}

#[test]
fn cost_limit_stops_runaway_expressions() {
    // Four nested comprehensions over 60 elements: 13 million iterations, far over the limit.
    let l: Vec<String> = (0..60).map(|i| i.to_string()).collect();
    let l = format!("[{}]", l.join(","));
    let src = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, a + b + c + d >= 0))))");
    let env = Env::default();
    let p = env.compile(&src).unwrap();
    let err = env.eval(&p, &h100()).unwrap_err();
    assert!(err.is_cost_limit(), "{err}");
    assert_eq!(err.to_string(), "operation cancelled: actual cost limit exceeded");
    // A small one stays well under it.
    let p = env.compile("device.driver == 'gpu.nvidia.com'").unwrap();
    let (_, cost) = env.eval_with_cost(&p, &h100()).unwrap();
    assert!(cost < 10, "{cost}");
}

#[test]
fn runtime_and_estimated_costs_follow_cel_go() {
    let env = Env::default();
    let cost = |src: &str| env.eval_with_cost(&env.compile(src).unwrap(), &h100()).map(|(_, c)| c).unwrap();
    // device (1) + .driver (1) + equality of 14-character strings (2).
    assert_eq!(cost("device.driver == 'gpu.nvidia.com'"), 4);
    // upstream's note: the bind test costs 15 estimated, 5 at runtime.
    assert_eq!(cost("cel.bind(dra, device.attributes['gpu.nvidia.com'], dra.type == 'gpu')"), 5 + 1);
    // a constant quantity is folded: receiver 4 + compareTo 1 + `>=` 1.
    assert_eq!(cost("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0"), 6);
    // `all` over a 3-element list: result 1 + 3 × (3 + `x` 1 + `>` 1); the constant list is free.
    assert_eq!(cost("[1, 2, 3].all(x, x > 0)"), 1 + 3 * 5);
    // `in` on a constant list is a set lookup.
    assert_eq!(cost("device.attributes['gpu.nvidia.com'].type in ['gpu', 'mig']"), 4);
    let p = env.compile("device.attributes['gpu.nvidia.com'].models.exists(x, x > 0)").unwrap();
    assert_eq!(p.estimated_cost, 389, "cel-go's static estimate");
}

#[test]
fn device_conversion_errors() {
    let d: Device = serde_json::from_value(json!({"name": "d", "attributes": {"bad": {}}})).unwrap();
    assert_eq!(DeviceView::new("x", &d).unwrap_err().to_string(), "attribute bad: unsupported attribute value");
    let d: Device = serde_json::from_value(json!({"name": "d", "attributes": {"v": {"version": "1.0"}}})).unwrap();
    assert_eq!(
        DeviceView::new("x", &d).unwrap_err().to_string(),
        "attribute v: parse semantic version: No Major.Minor.Patch elements found"
    );
    // `x` and `<driver>/x` land on the same key; the fully-qualified one wins, deterministically.
    let d: Device =
        serde_json::from_value(json!({"name": "d", "attributes": {"x": {"int": 1}, "drv/x": {"int": 2}}})).unwrap();
    let v = DeviceView::new("drv", &d).unwrap();
    let env = Env::default();
    assert_eq!(env.eval(&env.compile("device.attributes['drv'].x == 2").unwrap(), &v), Ok(true));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Arbitrary text never panics: it compiles or returns an error, and evaluation too.
    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,1024}") {
        let env = Env::default();
        if let Ok(p) = env.compile(&src) {
            let _ = env.eval(&p, &h100());
        }
    }

    /// Text built from CEL's own tokens reaches deeper into the parser and evaluator.
    #[test]
    fn token_soup_never_panics(tokens in proptest::collection::vec(proptest::sample::select(vec![
        "device", ".", "attributes", "capacity", "driver", "[", "]", "(", ")", "'gpu.nvidia.com'", "productName",
        "memory", "==", "!=", "<", ">=", "&&", "||", "!", "-", "+", "*", "/", "%", "?", ":", "1", "0", "1u", "2.5",
        "'x'", "b'y'", "true", "null", "in", ",", "{", "}", "quantity('1Gi')", "semver('1.0.0')", ".?", "[?",
        "all", "exists", "map", "filter", "x", "has", "size", "cel.bind", "orValue", "compareTo", "includes",
        "matches", "'('", "9223372036854775807", "-9223372036854775808",
    ]), 0..60)) {
        let src = tokens.join(" ");
        let env = Env::default();
        if let Ok(p) = env.compile(&src) {
            let _ = env.eval(&p, &h100());
        }
    }
}
