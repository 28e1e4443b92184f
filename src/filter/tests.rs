use super::parse::time_operand;
use super::*;
use serde_json::json;

fn parse(v: Value) -> Result<Filter> {
    Filter::from_json(&v)
}

#[test]
fn bare_value_is_eq_and_star_is_exists() {
    assert_eq!(
        parse(json!({"user_id": "alice"})).ok(),
        Some(Filter::user("alice"))
    );
    assert_eq!(
        parse(json!({"agent_id": "*"})).ok(),
        Some(Filter::Condition(Condition::Owner(
            OwnerField::Agent,
            Op::Exists
        )))
    );
}

#[test]
fn unknown_fields_and_operators_are_400() {
    for bad in [
        json!({"usr_id": "a"}),
        json!({"user_id": {"like": "a"}}),
        json!({"and": [{"user_id": "a"}]}),
        json!({"created_at": {"contains": "2024"}}),
        json!({"created_at": "yesterday"}),
        json!({"user_id": {"gt": "a"}}),
        json!({"keywords": "pizza"}),
        json!({"categories": {"lt": "x"}}),
        json!({"metadata.a b": 1}),
        json!({"metadata.x": {"eq": null}}),
        json!({"AND": []}),
        json!({"OR": {"user_id": "a"}}),
        json!([{"user_id": "a"}]),
        json!({"user_id": 3}),
        json!({"categories": {"in": "food"}}),
        json!({"metadata.x": {"gt": 1, "between": 3}}),
        json!({"metadata.x": {"like": "a"}}),
        json!({"metadata": {"x": {}}}),
        json!({"created_at": {"in": vec!["2024-01-01"; MAX_TIME_VALUES + 1]}}),
        json!({"OR": vec![json!({"user_id": {"in": vec!["a"; 600]}}); 2]}),
    ] {
        let err = parse(bad.clone()).err();
        assert_eq!(err.as_ref().map(Error::status), Some(400), "{bad}");
    }
}

#[test]
fn depth_and_size_are_bounded() {
    let mut deep = json!({"user_id": "a"});
    for _ in 0..MAX_FILTER_DEPTH {
        deep = json!({"NOT": deep});
    }
    assert_eq!(parse(deep).err().map(|e| e.status()), Some(400));
    let many: Vec<Value> = (0..=MAX_FILTER_CONDITIONS)
        .map(|i| json!({"user_id": i.to_string()}))
        .collect();
    assert_eq!(
        parse(json!({"OR": many})).err().map(|e| e.status()),
        Some(400)
    );
}

#[test]
fn code_built_filters_are_validated() {
    let meta = |path: Vec<&str>| {
        Filter::Condition(Condition::Metadata(
            path.into_iter().map(String::from).collect(),
            Op::Exists,
        ))
    };
    assert!(meta(vec!["a", "b"]).validate().is_ok());
    assert_eq!(meta(vec![]).validate().err().map(|e| e.status()), Some(400));
    assert_eq!(
        meta(vec!["a\"b"]).validate().err().map(|e| e.status()),
        Some(400)
    );
    let mut deep = Filter::user("a");
    for _ in 0..10_000 {
        deep = Filter::Not(Box::new(deep));
    }
    assert_eq!(deep.validate().err().map(|e| e.status()), Some(400));
    let big = Filter::Condition(Condition::Owner(
        OwnerField::User,
        Op::In(vec!["a".into(); 1001]),
    ));
    assert_eq!(big.validate().err().map(|e| e.status()), Some(400));
    // Dropping a very deep filter must not overflow the stack either.
    std::mem::forget(deep);
}

#[test]
fn literal_objects_need_eq() {
    let f = Filter::from_json(&json!({"metadata.x": {"eq": {"k": 1}}}));
    assert!(f.is_ok());
}

#[test]
fn days_cover_the_whole_day() {
    let r = time_operand("created_at", &json!("2024-07-01")).ok();
    assert_eq!(r.map(|r| r.end - r.start), Some(86_400_000_000));
    let at = time_operand("created_at", &json!("2024-07-01T23:59:00Z"))
        .ok()
        .map(|r| r.start);
    let lte =
        Op::Lte(time_operand("x", &json!("2024-07-01")).unwrap_or(TimeRange { start: 0, end: 0 }));
    assert!(time_matches(at, &lte));
}

#[test]
fn metadata_semantics() {
    let v = json!({"n": 3, "s": "Hello World", "tags": ["a", "b"], "nested": {"k": 1.0}});
    let map = v.as_object().cloned().unwrap_or_default();
    let at = |p: &str| lookup(&map, &p.split('.').map(String::from).collect::<Vec<_>>());
    assert!(metadata_matches(at("n"), &Op::Eq(json!(3.0))));
    assert!(metadata_matches(at("n"), &Op::Gt(json!(2))));
    assert!(!metadata_matches(at("n"), &Op::Gt(json!("2"))));
    assert!(metadata_matches(at("s"), &Op::Icontains("WORLD".into())));
    assert!(metadata_matches(at("tags"), &Op::Contains(json!("b"))));
    assert!(metadata_matches(at("nested.k"), &Op::Eq(json!(1))));
    assert!(metadata_matches(at("missing"), &Op::Ne(json!(1))));
    assert!(!metadata_matches(at("missing"), &Op::Exists));
}

#[test]
fn spec_shaped_filters_parse() {
    let f =
        parse(json!({"metadata": {"topic": "food", "n": {"gte": 2}}, "categories": ["a", "b"]}));
    assert!(matches!(f, Ok(Filter::And(ref parts)) if parts.len() == 2));
}

#[test]
fn filters_built_in_code_obey_the_operator_table() {
    let range = TimeRange { start: 0, end: 1 };
    let cases = [
        (Condition::Keywords(Op::Gt("a".into())), "keywords", "gt"),
        (Condition::Keywords(Op::Eq("tea".into())), "keywords", "eq"),
        (
            Condition::Categories(Op::Lt("x".into())),
            "categories",
            "lt",
        ),
        (
            Condition::Owner(OwnerField::User, Op::Gte("a".into())),
            "user_id",
            "gte",
        ),
        (
            Condition::Time(TimeField::Created, Op::Exists),
            "created_at",
            "\"*\"",
        ),
        (
            Condition::Time(TimeField::Updated, Op::Contains(range)),
            "updated_at",
            "contains",
        ),
    ];
    assert_eq!(cases.len(), 6);
    for (condition, field, op) in cases {
        // Alone, and deep inside other filters: refused the same way.
        let alone = Filter::Condition(condition.clone());
        let nested = Filter::Or(vec![
            Filter::user("ann"),
            Filter::Not(Box::new(Filter::user("bob").and(alone.clone()))),
        ]);
        for filter in [alone, nested] {
            let err = filter.validate().unwrap_err();
            assert_eq!(err.status(), 400, "{filter:?}");
            let detail = err.detail();
            assert!(
                detail.contains(field) && detail.contains(&format!("operator {op} ")),
                "{detail}"
            );
        }
    }
    // What the table allows passes.
    for fine in [
        Condition::Keywords(Op::Icontains("tea".into())),
        Condition::Time(TimeField::Expiration, Op::Exists),
        Condition::Metadata(vec!["n".into()], Op::Gt(json!(1))),
        Condition::Categories(Op::Contains("food".into())),
    ] {
        assert!(Filter::Condition(fine).validate().is_ok());
    }
}

#[test]
fn current_owners_are_only_owner_pins_with_the_current_view() {
    let pins = |f: &Filter| {
        f.current_owners().map(|p| {
            p.into_iter()
                .map(|(f, id)| (f, id.to_owned()))
                .collect::<Vec<_>>()
        })
    };
    let user_now = Filter::user("u").and(Filter::current());
    assert_eq!(
        pins(&user_now),
        Some(vec![(OwnerField::User, "u".to_owned())])
    );
    let two = Filter::user("u")
        .and(Filter::agent("a"))
        .and(Filter::current());
    assert_eq!(
        pins(&two),
        Some(vec![
            (OwnerField::User, "u".to_owned()),
            (OwnerField::Agent, "a".to_owned())
        ])
    );
    // Superseded memories too, no owner, or any other condition: the store decides.
    for other in [
        Filter::user("u"),
        Filter::current(),
        Filter::user("u")
            .and(Filter::current())
            .and(parse(json!({"categories": {"in": ["x"]}})).unwrap()),
        Filter::Or(vec![Filter::user("u"), Filter::user("v")]).and(Filter::current()),
        parse(json!({"user_id": "*"}))
            .unwrap()
            .and(Filter::current()),
    ] {
        assert_eq!(pins(&other), None, "{other:?}");
    }
}
