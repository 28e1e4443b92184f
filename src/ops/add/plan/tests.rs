use super::*;
use crate::record::now;

/// A memory said long before the facts of the tests.
fn memory(text: &str, immutable: bool) -> Row {
    let mut row = Row::of_text(text, now() - chrono::Duration::days(1000), immutable);
    row.record.categories = vec!["food".into()];
    row
}

fn fact(text: &str) -> Fact {
    Fact {
        text: text.into(),
        categories: vec!["travel".into()],
        entities: vec!["Ana".into()],
        importance: 7,
    }
}

fn decision(fact: usize, event: Event, memory: Option<usize>) -> Decision {
    Decision {
        fact,
        event,
        memory,
        memory_still_true: None,
    }
}

fn context(spoken_at: DateTime<Utc>) -> Context {
    Context {
        messages: vec![Message::user("I moved to Lisbon and now drink green tea")],
        owners: Owners {
            user_id: Some("ann".into()),
            ..Owners::default()
        },
        metadata: Map::new(),
        categories: vec!["personal".into()],
        expiry: None,
        immutable: false,
        at: now(),
        spoken_at,
    }
}

/// The model's decisions, made safe: UPDATE and DELETE supersede, a NONE naming a memory
/// stores nothing, anything else adds; the facts asked about are numbered as asked.
#[test]
fn decisions_become_supersessions_repeats_and_additions() {
    let shown = vec![memory("Likes tea", false), memory("Lives in Madrid", false)];
    let known = vec![Some(FactPlan::None), None, None, None, None];
    let asked = [1, 2, 3, 4];
    let decisions = [
        decision(0, Event::Update, Some(0)),
        decision(1, Event::Delete, Some(1)),
        decision(2, Event::None, Some(0)),
        decision(3, Event::None, None),
    ];
    let plans = decide(known, &asked, &shown, &decisions);
    assert_eq!(
        plans,
        [
            FactPlan::None,
            FactPlan::Supersede { memory: 0 },
            FactPlan::Supersede { memory: 1 },
            FactPlan::None,
            FactPlan::Add,
        ]
    );
}

/// No decision loses a fact: a missing one, one naming a memory out of range, and an
/// UPDATE without a memory all add the fact.
#[test]
fn a_fact_without_a_usable_decision_is_added() {
    let shown = vec![memory("Likes tea", false)];
    let decisions = [
        decision(1, Event::Update, Some(7)),
        decision(2, Event::Update, None),
    ];
    let plans = decide(vec![None; 3], &[0, 1, 2], &shown, &decisions);
    assert_eq!(plans, [FactPlan::Add, FactPlan::Add, FactPlan::Add]);
}

/// An immutable memory is never superseded, nor one memory twice in a call: the fact is
/// added beside it.
#[test]
fn immutable_and_taken_memories_are_not_superseded() {
    let shown = vec![
        memory("Is allergic to nuts", true),
        memory("Likes tea", false),
    ];
    let decisions = [
        decision(0, Event::Update, Some(0)),
        decision(1, Event::Delete, Some(1)),
        decision(2, Event::Update, Some(1)),
    ];
    let plans = decide(vec![None; 3], &[0, 1, 2], &shown, &decisions);
    assert_eq!(
        plans,
        [
            FactPlan::Add,
            FactPlan::Supersede { memory: 1 },
            FactPlan::Add,
        ]
    );
}

#[test]
fn a_plan_becomes_writes_with_digests_history_input_and_credits() {
    let shown = vec![memory("Likes tea", false), memory("Lives in Madrid", false)];
    let plans = [
        FactPlan::Add,
        FactPlan::Supersede { memory: 0 },
        FactPlan::None,
    ];
    let facts = [fact("Moved to Lisbon"), fact("Likes green tea"), fact("x")];
    let cx = context(now() - chrono::Duration::days(400));
    let prices = Prices {
        add: 3,
        update: 5,
        inference: 100,
    };
    let out = writes(
        &plans,
        &facts,
        vec![vec![1.0], vec![2.0], vec![3.0]],
        &shown,
        &cx,
        &prices,
    );
    assert_eq!(
        out.credits, 8,
        "one add and one supersession; the model call is not here"
    );
    assert_eq!(out.writes.len(), 3);
    let Write::Insert(new) = &out.writes[0] else {
        panic!("{:?}", out.writes[0])
    };
    assert_eq!(new.record.memory, "Moved to Lisbon");
    assert_eq!(new.record.categories, vec!["personal", "travel"]);
    assert_eq!(new.input, cx.messages);
    assert_eq!(
        (new.record.created_at, new.record.updated_at),
        (cx.spoken_at, cx.at),
        "dated when it was said, updated when stored"
    );
    assert_eq!(new.record.valid_from, cx.spoken_at);
    let core = new.record.core().unwrap();
    assert_eq!(
        (core.importance, core.entities.clone()),
        (7, vec!["Ana".to_string()])
    );
    // The fact that supersedes a memory is a new memory, with the memory's labels too.
    let Write::Insert(successor) = &out.writes[1] else {
        panic!("{:?}", out.writes[1])
    };
    assert_eq!(successor.record.memory, "Likes green tea");
    assert_eq!(successor.vector, vec![2.0]);
    assert_eq!(
        successor.record.categories,
        vec!["food", "personal", "travel"]
    );
    let Write::Supersede {
        id,
        by,
        at,
        input,
        expect,
    } = &out.writes[2]
    else {
        panic!("{:?}", out.writes[2])
    };
    assert_eq!((*id, *by), (shown[0].record.id, successor.record.id));
    assert_eq!(*at, cx.spoken_at, "valid until the news was said");
    assert_eq!(input, &cx.messages);
    assert_eq!(*expect, Some(3), "written only over the version shown");
}

/// A statement older than the memory it would supersede (a conversation added out of
/// order) supersedes nothing: it is stored as history, superseded by the memory.
#[test]
fn an_older_statement_is_stored_as_history_of_the_memory() {
    let row = memory("Lives in Madrid", false);
    let fact = fact("Lives in Lisbon");
    let older = context(row.record.valid_from - chrono::Duration::days(30));
    let mut record = new_record(Uuid::now_v7(), &fact, &[], &older);
    assert!(supersede(&row, &mut record, &older).is_none());
    assert_eq!(record.valid_until, Some(row.record.valid_from));
    assert_eq!(record.superseded_by, Some(row.record.id));
    let newer = context(now());
    let mut record = new_record(Uuid::now_v7(), &fact, &[], &newer);
    assert!(matches!(
        supersede(&row, &mut record, &newer),
        Some(Write::Supersede { .. })
    ));
    assert!(record.is_current());
}
