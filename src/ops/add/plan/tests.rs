use super::*;
use crate::record::now;

fn memory(text: &str, immutable: bool) -> Row {
    // Said long before the facts of the tests.
    let at = now() - chrono::Duration::days(1000);
    let record = MemoryRecord {
        id: Uuid::now_v7(),
        memory: text.into(),
        owners: Owners::default(),
        metadata: Map::new(),
        categories: vec!["food".into()],
        immutable,
        expiration_date: None,
        created_at: at,
        updated_at: at,
        hash: content_hash(text),
        context: None,
        valid_from: at,
        valid_until: None,
        superseded_by: None,
    };
    Row::new(record, 1, 3, 1, None)
}

fn fact(text: &str) -> Fact {
    Fact {
        text: text.into(),
        categories: vec!["travel".into()],
        entities: vec!["Ana".into()],
        importance: 7,
    }
}

fn decision(fact: usize, event: Event, memory: Option<usize>, text: Option<&str>) -> Decision {
    Decision {
        fact,
        event,
        memory,
        text: text.map(str::to_string),
    }
}

fn texts(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| t.to_string()).collect()
}

/// Every memory shown found for every fact asked about (the tests have fewer of each),
/// memory `i` most relevant to the fact the model calls `i`.
fn anywhere() -> Vec<Vec<usize>> {
    (0..8)
        .map(|i| {
            std::iter::once(i)
                .chain((0..8).filter(|&m| m != i))
                .collect()
        })
        .collect()
}

/// A conversation after every memory of the tests was created.
fn later() -> DateTime<Utc> {
    now() + chrono::Duration::days(1)
}

/// [`decide`] for facts none of which is known yet, all asked about in their order,
/// from a conversation after the memories.
fn decided(
    facts: &[String],
    shown: &[Row],
    found: &[Vec<usize>],
    decisions: Vec<Decision>,
) -> Plan {
    let asked: Vec<usize> = (0..facts.len()).collect();
    decide(
        vec![None; facts.len()],
        facts,
        &asked,
        shown,
        found,
        decisions,
        later(),
    )
}

#[test]
fn an_older_fact_never_replaces_a_newer_memory() {
    let shown = vec![
        memory("Lives in Valencia", false),
        memory("Has a cat", false),
    ];
    let facts = texts(&["Lives in Lisbon", "Has a cat named Tom"]);
    let old_chat = now() - chrono::Duration::days(3 * 365);
    let decisions = || {
        vec![
            decision(0, Event::Delete, Some(0), None),
            decision(1, Event::Update, Some(1), Some("Has a cat, Tom")),
        ]
    };
    let plan = decide(
        vec![None, None],
        &facts,
        &[0, 1],
        &shown,
        &anywhere(),
        decisions(),
        old_chat,
    );
    assert_eq!(plan.facts, vec![FactPlan::None, FactPlan::None]);
    assert!(plan.doubtful.is_empty(), "the newer memory stays");
    // The same decisions from a conversation after the memories apply.
    let plan = decided(&facts, &shown, &anywhere(), decisions());
    assert_eq!(plan.doubtful, vec![(0, 0)]);
    assert_eq!(
        plan.facts,
        vec![
            FactPlan::Add,
            FactPlan::Update {
                memory: 1,
                text: "Has a cat named Tom".into()
            }
        ]
    );
}

#[test]
fn decisions_become_plans_and_only_safe_ones_stand() {
    let shown = vec![
        memory("Lives in Madrid", false),
        memory("Blood type O", true),
        memory("Likes tea", false),
        memory("Plays chess", false),
    ];
    // Facts 0..=5; 6 is an exact repeat found without the model.
    let facts = texts(&[
        "Moved to Lisbon",
        "Blood type A",
        "Likes green tea now",
        "Likes black tea",
        "Likes tea",
        "I play chess",
        "Plays chess",
    ]);
    let mut known = vec![None; 7];
    known[6] = Some(FactPlan::None);
    let asked = [0, 1, 2, 3, 4, 5];
    // The memory each fact names is the most relevant to it.
    let found = vec![vec![0], vec![1], vec![2], vec![2], vec![3], vec![3]];
    let plan = decide(
        known,
        &facts,
        &asked,
        &shown,
        &found,
        vec![
            // A contradiction: the fact is added, the memory gets a second look.
            decision(0, Event::Delete, Some(0), None),
            // An immutable memory is never deleted, nor updated: the fact is added.
            decision(1, Event::Delete, Some(1), None),
            decision(1, Event::Update, Some(1), Some("Blood type A")),
            // An update: the memory takes the fact's text, not the model's.
            decision(2, Event::Update, Some(2), Some("Likes tea, green now")),
            // A second change of the same memory becomes an add.
            decision(3, Event::Update, Some(2), Some("Likes black tea")),
            // Known already.
            decision(4, Event::None, None, None),
            // An update to the same text carries nothing of fact 5: it is added.
            decision(5, Event::Update, Some(3), Some("Plays chess")),
            // Out-of-range numbers from the model are ignored.
            decision(9, Event::Add, None, None),
            decision(4, Event::Delete, Some(7), None),
        ],
        later(),
    );
    assert_eq!(
        plan.facts,
        vec![
            FactPlan::Add,
            FactPlan::Add,
            FactPlan::Update {
                memory: 2,
                text: "Likes green tea now".into()
            },
            FactPlan::Add,
            FactPlan::None,
            FactPlan::Add,
            FactPlan::None,
        ]
    );
    assert_eq!(plan.doubtful, vec![(0, 0), (5, 3)]);
}

/// An update whose text shares no word with the memory's but function words (small models
/// write a remark in place of a hobby) is not about it: the fact is added, the memory stays.
#[test]
fn an_update_about_something_else_leaves_the_memory_and_adds_the_fact() {
    let shown = vec![
        memory("Swims on Sundays", false),
        memory("Lives in Oslo", false),
        memory("Ich segle gern", false),
        memory("Ich wohne in Kiel", false),
    ];
    let plan = decided(
        &texts(&[
            "Grey skies today!",
            "Moved to Bergen",
            "Ich gebe zweimal die Woche Nachhilfe in Mathe",
            "Ich wohne jetzt in Bremen",
            "Swims on Mondays",
        ]),
        &shown,
        &anywhere(),
        vec![
            decision(0, Event::Update, Some(0), Some("Grey skies today!")),
            decision(1, Event::Update, Some(1), Some("Lives in Bergen now")),
            // Shares "ich" alone with the memory.
            decision(
                2,
                Event::Update,
                Some(2),
                Some("Ich gebe zweimal die Woche Nachhilfe in Mathe"),
            ),
            decision(3, Event::Update, Some(3), Some("Ich wohne jetzt in Bremen")),
        ],
    );
    assert_eq!(
        plan.facts,
        vec![
            FactPlan::Add,
            FactPlan::Update {
                memory: 1,
                text: "Moved to Bergen".into()
            },
            FactPlan::Add,
            FactPlan::Update {
                memory: 3,
                text: "Ich wohne jetzt in Bremen".into()
            },
            // Undecided: added.
            FactPlan::Add,
        ]
    );
    assert_eq!(
        plan.doubtful,
        vec![(0, 0), (2, 2)],
        "the remark and the tutoring get a second look"
    );
}

/// An UPDATE stands only when its text brings a word of the new facts into the memory:
/// a new value, a number; not a small word changed, nor a word the facts lack.
#[test]
fn an_update_must_bring_news_from_the_facts() {
    let shown = vec![
        memory("Ik speel elke zondag hockey", false),
        memory("I'm 34", false),
        memory("Lives in Oslo", false),
        memory("Works at a bakery", false),
    ];
    let facts = texts(&[
        "Daarnaast ben ik begonnen met schilderen in de tuin",
        "I'm actually 43",
        "Moved to Bergen",
        "Got a new job",
    ]);
    let plan = decided(
        &facts,
        &shown,
        &anywhere(),
        vec![
            decision(0, Event::Update, Some(0), Some("Ik speel de zondag hockey")),
            decision(1, Event::Update, Some(1), Some("I'm 43")),
            decision(2, Event::Update, Some(2), Some("Lives in Bergen")),
            decision(3, Event::Update, Some(3), Some("Works at a bank")),
        ],
    );
    assert_eq!(
        plan.facts,
        vec![
            FactPlan::Add,
            FactPlan::Update {
                memory: 1,
                text: "I'm actually 43".into()
            },
            FactPlan::Update {
                memory: 2,
                text: "Moved to Bergen".into()
            },
            // "bank" is the model's, not the user's.
            FactPlan::Add,
        ]
    );
}

/// Each fact the model was asked about and the plan adds gets a closer look at its two
/// most relevant memories that it may replace: none that is immutable, newer than the
/// conversation, updated by another fact, or already given a second look with it; none
/// for a fact marked as one more of its kind, nor for a fact the plan updates with.
#[test]
fn an_added_fact_gets_a_closer_look_at_its_nearest_replaceable_memories() {
    let mut shown = vec![
        memory("J'habite à Lille", false),
        memory("Je cours le dimanche", false),
        memory("Je suis végétarien", true),
        memory("J'ai un chat", false),
        memory("Je joue du violon", false),
    ];
    shown[3].record.created_at = later() + chrono::Duration::days(1);
    let facts = texts(&[
        "On s'est installés à Bordeaux",
        "Je mange de nouveau de la viande",
        "Je fais aussi du judo",
        "Il fait chaud",
        "Je joue du violoncelle",
        "Je cours le samedi",
    ]);
    let found = vec![
        // Most relevant first.
        vec![0, 1, 4],
        vec![2, 3, 1],
        vec![4],
        vec![],
        vec![4, 0],
        vec![1],
    ];
    let plan = decided(
        &facts,
        &shown,
        &found,
        vec![
            decision(0, Event::Add, None, None),
            decision(1, Event::Add, None, None),
            decision(2, Event::Add, None, None),
            decision(3, Event::Add, None, None),
            // Restates its memory: doubtful, given a second look instead.
            decision(4, Event::Update, Some(4), Some("Je joue du violon")),
            decision(5, Event::Update, Some(1), Some("Je cours le samedi")),
        ],
    );
    assert_eq!(plan.doubtful, vec![(4, 4)]);
    let asked: Vec<usize> = (0..facts.len()).collect();
    assert_eq!(
        plan.closer_looks(&facts, &asked, &shown, &found, later()),
        vec![(0, vec![0, 4]), (4, vec![0])]
    );
    // Facts are numbered as the model was asked about them; undecided, they are added.
    let asked = [5, 0, 1, 2, 3, 4];
    let plan = decide(
        vec![None; facts.len()],
        &facts,
        &asked,
        &shown,
        &found,
        vec![decision(1, Event::Add, None, None)],
        later(),
    );
    assert_eq!(
        plan.closer_looks(&facts, &asked, &shown, &found, later())[0],
        (5, vec![0, 1])
    );
}

/// A second look is checked against the fact's most relevant other memory that it could
/// replace: not the memory looked at, not an immutable one, none when there is no other.
#[test]
fn a_second_look_is_checked_against_the_facts_next_replaceable_memory() {
    let shown = vec![
        memory("J'habite à Lille", false),
        memory("Je suis végétarien", true),
        memory("Je joue du violon", false),
    ];
    let facts = texts(&["On s'est installés à Bordeaux", "Je joue du violoncelle"]);
    // Most relevant first.
    let found = vec![vec![0, 1, 2], vec![2]];
    let added = vec![
        decision(0, Event::Add, None, None),
        decision(1, Event::Add, None, None),
    ];
    let plan = decided(&facts, &shown, &found, added);
    let asked = [0, 1];
    assert_eq!(plan.rival(0, 0, &asked, &shown, &found), Some(2));
    assert_eq!(plan.rival(0, 2, &asked, &shown, &found), Some(0));
    assert_eq!(plan.rival(1, 2, &asked, &shown, &found), None);
    // Facts are numbered as the model was asked about them; one not asked has none.
    assert_eq!(plan.rival(1, 2, &[1, 0], &shown, &found), Some(0));
    assert_eq!(plan.rival(0, 2, &[1], &shown, &found), None);
}

/// An UPDATE whose text fails the checks is doubtful: its fact is added and it gets a
/// second look, while its memory is mutable and nothing else changes it; a superseding
/// fact takes the memory's place only while no other fact has.
#[test]
fn a_doubtful_update_gets_a_second_look() {
    let shown = vec![
        memory("Ich wohne in Köln", false),
        memory("Has a dog", true),
        memory("Swims on Sundays", false),
        memory("Plays chess", false),
    ];
    let facts = texts(&[
        "Wir sind nach Freiburg gezogen",
        "Has a cat",
        "Swims on Mondays",
        "Grey skies today",
        "Plays the piano",
    ]);
    let found = vec![vec![0], vec![1], vec![2], vec![2], vec![3]];
    let mut plan = decided(
        &facts,
        &shown,
        &found,
        vec![
            // No word shared with the memory.
            decision(
                0,
                Event::Update,
                Some(0),
                Some("Wir sind nach Freiburg gezogen"),
            ),
            decision(1, Event::Update, Some(1), Some("Has a dog")),
            decision(2, Event::Update, Some(2), Some("Swims on Mondays")),
            // Memory 2 is taken by then.
            decision(3, Event::Update, Some(2), Some("Swims on Sundays")),
            // Restates its memory.
            decision(4, Event::Update, Some(3), Some("Plays chess")),
        ],
    );
    assert_eq!(plan.doubtful, vec![(0, 0), (4, 3)]);
    assert_eq!(plan.second_looks(), vec![(0, 0), (4, 3)]);
    assert!(plan.supersede(0, 0, "Wir sind nach Freiburg gezogen"));
    assert!(
        !plan.supersede(4, 0, "Plays the piano"),
        "memory 0 is taken"
    );
    assert!(
        !plan.supersede(2, 3, "Swims on Mondays"),
        "fact 2 is no addition"
    );
    assert_eq!(
        plan.facts,
        vec![
            FactPlan::Update {
                memory: 0,
                text: "Wir sind nach Freiburg gezogen".into()
            },
            FactPlan::Add,
            FactPlan::Update {
                memory: 2,
                text: "Swims on Mondays".into()
            },
            FactPlan::Add,
            FactPlan::Add,
        ]
    );
    // Fact 0 is no longer added.
    assert_eq!(plan.second_looks(), vec![(4, 3)]);
}

/// A fact its speaker marked as one more of its kind ("anche", "ook", "too") never
/// takes a memory's place, whatever the model decided; the same fact without the mark
/// does, and so does one with "Also" as its first word; a word that only contains one
/// ("Toots") is no mark.
#[test]
fn a_fact_said_to_be_one_more_of_its_kind_replaces_nothing() {
    let shown = vec![
        memory("Adoro la cucina giapponese", false),
        memory("Ik ben timmerman in Utrecht", false),
        memory("My dog is called Rex", false),
    ];
    let decisions = || {
        vec![
            decision(0, Event::Update, Some(0), Some("Adoro la cucina etiope")),
            decision(1, Event::Delete, Some(1), None),
            decision(2, Event::Update, Some(2), Some("My dog is called Toots")),
        ]
    };
    let marked = texts(&[
        "Mi piace anche la cucina etiope",
        "Ik werk op zondag ook in het dierenasiel",
        "We have a cat called Toots too",
    ]);
    let plan = decided(&marked, &shown, &anywhere(), decisions());
    assert_eq!(plan.facts, vec![FactPlan::Add; 3]);
    assert!(plan.doubtful.is_empty());
    // Unmarked, or "Also" first: news, which may replace.
    let unmarked = texts(&[
        "Mi piace la cucina etiope",
        "Ik werk in het dierenasiel",
        "Also, my dog is called Toots",
    ]);
    let plan = decided(&unmarked, &shown, &anywhere(), decisions());
    assert_eq!(
        plan.facts,
        vec![
            FactPlan::Update {
                memory: 0,
                text: "Mi piace la cucina etiope".into()
            },
            FactPlan::Add,
            FactPlan::Update {
                memory: 2,
                text: "Also, my dog is called Toots".into()
            },
        ]
    );
    assert_eq!(plan.doubtful, vec![(1, 1)]);
}

/// A fact its speaker says still holds ("still", "immer noch", "ainda") confirms its
/// memory and never takes its place; "J'ai toujours voulu" is "always", and the same facts
/// without the mark may replace.
#[test]
fn a_fact_said_to_still_hold_replaces_nothing() {
    let shown = vec![
        memory("I love cycling", false),
        memory("Ich spiele Geige", false),
        memory("Moro em Lisboa", false),
        memory("J'habite à Lyon", false),
    ];
    let decisions = || {
        vec![
            decision(0, Event::Update, Some(0), Some("I cycle every weekend")),
            decision(
                1,
                Event::Update,
                Some(1),
                Some("Ich spiele Geige im Orchester"),
            ),
            decision(2, Event::Delete, Some(2), None),
            decision(3, Event::Update, Some(3), Some("J'habite à Paris")),
        ]
    };
    let still = texts(&[
        "I still cycle every weekend",
        "Ich spiele immer noch Geige im Orchester",
        "Ainda moro em Lisboa, perto do rio",
        "J'ai toujours voulu vivre à Paris, j'y habite",
    ]);
    let plan = decided(&still, &shown, &anywhere(), decisions());
    assert_eq!(
        plan.facts[..3],
        [FactPlan::Add, FactPlan::Add, FactPlan::Add]
    );
    assert!(matches!(plan.facts[3], FactPlan::Update { memory: 3, .. }));
    assert!(plan.doubtful.is_empty());
    let unmarked = texts(&[
        "I cycle every weekend",
        "Ich spiele Geige im Orchester",
        "Moro em Lisboa, perto do rio",
        "J'habite à Paris",
    ]);
    let plan = decided(&unmarked, &shown, &anywhere(), decisions());
    assert!(matches!(plan.facts[0], FactPlan::Update { memory: 0, .. }));
    assert!(matches!(plan.facts[1], FactPlan::Update { memory: 1, .. }));
    assert_eq!(plan.doubtful, vec![(2, 2)]);
}

/// An UPDATE whose text keeps all of the memory beside the news says both hold: the
/// fact is added and the memory stays. One that drops the old value is a change.
#[test]
fn an_update_that_states_both_adds_the_fact() {
    let shown = vec![
        memory("I'm a software engineer at a bank", false),
        memory("My book club meets on Wednesdays", false),
    ];
    let facts = texts(&[
        "I mentor students at a coding bootcamp",
        "The book club is on Thursdays",
    ]);
    let plan = decided(
        &facts,
        &shown,
        &anywhere(),
        vec![
            decision(
                0,
                Event::Update,
                Some(0),
                Some("I'm a software engineer at a bank and mentor students"),
            ),
            decision(
                1,
                Event::Update,
                Some(1),
                Some("My book club meets on Thursdays"),
            ),
        ],
    );
    assert_eq!(
        plan.facts,
        vec![
            FactPlan::Add,
            FactPlan::Update {
                memory: 1,
                text: "The book club is on Thursdays".into()
            }
        ]
    );
    assert!(plan.doubtful.is_empty(), "the model's answer was clear");
}

#[test]
fn a_fact_replaces_only_a_memory_found_for_it() {
    let shown = vec![
        memory("Trabajo de camarera en un hotel", false),
        memory("Tengo dos gatos", false),
    ];
    let facts = texts(&[
        "Por fin dejé el hotel",
        "Now I am a receptionist at a dental clinic",
    ]);
    // Fact 0 found both memories; fact 1 found the job only.
    let found = vec![vec![0, 1], vec![0]];
    let decisions = vec![
        decision(0, Event::Delete, Some(0), None),
        decision(
            1,
            Event::Update,
            Some(1),
            Some("Now I am a receptionist, two cats"),
        ),
    ];
    let plan = decided(&facts, &shown, &found, decisions);
    assert_eq!(plan.facts, vec![FactPlan::Add, FactPlan::Add]);
    assert_eq!(
        plan.doubtful,
        vec![(0, 0)],
        "a second look at the memory found for its fact only"
    );
    // A DELETE of a memory not found for its fact is no question either.
    let plan = decided(
        &facts,
        &shown,
        &found,
        vec![decision(1, Event::Delete, Some(1), None)],
    );
    assert!(plan.doubtful.is_empty());
    assert_eq!(plan.facts, vec![FactPlan::Add, FactPlan::Add]);
}

#[test]
fn a_fact_does_not_replace_a_memory_in_place_of_a_nearer_one_another_fact_named() {
    let shown = vec![
        memory("Faccio il cameriere in una pizzeria di Palermo", false),
        memory("Ho un gatto nero", false),
    ];
    let facts = texts(&[
        "Mi sono licenziato",
        "Ho cambiato lavoro: ora sono in banca",
    ]);
    // Both facts found the pizzeria first and the cat second.
    let found = vec![vec![0, 1], vec![0, 1]];
    let decisions = || {
        vec![
            decision(0, Event::Delete, Some(0), None),
            decision(
                1,
                Event::Update,
                Some(1),
                Some("Un gatto, e lavoro in banca"),
            ),
        ]
    };
    let plan = decided(&facts, &shown, &found, decisions());
    assert_eq!(
        plan.facts,
        vec![FactPlan::Add, FactPlan::Add],
        "the bank job does not take the cat's place"
    );
    assert_eq!(plan.doubtful, vec![(0, 0)], "no second look at the cat");
    // Alone, a fact may replace a memory other than its most relevant one.
    let plan = decided(&facts, &shown, &found, decisions().split_off(1));
    assert_eq!(
        plan.facts[1],
        FactPlan::Update {
            memory: 1,
            text: facts[1].clone(),
        }
    );
    // And so may a fact whose more relevant memories no other fact names.
    let found = vec![vec![0, 1], vec![1, 0]];
    let plan = decided(&facts, &shown, &found, decisions());
    assert_eq!(
        plan.facts[1],
        FactPlan::Update {
            memory: 1,
            text: facts[1].clone(),
        }
    );
}

#[test]
fn a_plan_becomes_writes_with_digests_history_input_and_credits() {
    let shown = vec![memory("Likes tea", false), memory("Lives in Madrid", false)];
    let plan = Plan {
        doubtful: Vec::new(),
        beside: Vec::new(),
        facts: vec![
            FactPlan::Add,
            FactPlan::Update {
                memory: 0,
                text: "Likes green tea".into(),
            },
            FactPlan::None,
        ],
    };
    let facts = [fact("Moved to Lisbon"), fact("Likes green tea"), fact("x")];
    let at = now();
    let cx = Context {
        messages: vec![Message::user("I moved to Lisbon and now drink green tea")],
        owners: Owners {
            user_id: Some("ann".into()),
            ..Owners::default()
        },
        metadata: Map::new(),
        categories: vec!["personal".into()],
        expiry: None,
        immutable: false,
        at,
        spoken_at: at - chrono::Duration::days(400),
    };
    let prices = Prices {
        add: 3,
        update: 5,
        inference: 100,
    };
    let out = writes(
        &plan,
        &facts,
        vec![vec![1.0], vec![2.0], vec![3.0]],
        vec![vec![4.0]],
        &shown,
        &cx,
        &prices,
    );
    assert_eq!(
        out.credits, 8,
        "one add and one update; the model call is not here"
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
    let core = new.record.core().unwrap();
    assert_eq!(
        (core.importance, core.entities.clone()),
        (7, vec!["Ana".to_string()])
    );
    // The fact that takes a memory's place is a new memory, which supersedes it.
    let Write::Insert(successor) = &out.writes[1] else {
        panic!("{:?}", out.writes[1])
    };
    assert_eq!(successor.record.memory, "Likes green tea");
    assert_eq!(successor.vector, vec![4.0]);
    assert_eq!(successor.record.categories, vec!["food", "personal", "travel"]);
    assert_eq!(successor.record.valid_from, cx.spoken_at);
    assert_eq!(out.ids, [Some(new.record.id), Some(successor.record.id), None]);
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
    let cx = |spoken_at| Context {
        messages: Vec::new(),
        owners: Owners::default(),
        metadata: Map::new(),
        categories: Vec::new(),
        expiry: None,
        immutable: false,
        at: now(),
        spoken_at,
    };
    let fact = fact("Lives in Lisbon");
    let older = cx(row.record.valid_from - chrono::Duration::days(30));
    let mut record = new_record(Uuid::now_v7(), &fact.text, &fact, &[], &older);
    assert!(supersede(&row, &mut record, &older).is_none());
    assert_eq!(record.valid_until, Some(row.record.valid_from));
    assert_eq!(record.superseded_by, Some(row.record.id));
    let newer = cx(now());
    let mut record = new_record(Uuid::now_v7(), &fact.text, &fact, &[], &newer);
    assert!(matches!(
        supersede(&row, &mut record, &newer),
        Some(Write::Supersede { .. })
    ));
    assert!(record.is_current());
}
