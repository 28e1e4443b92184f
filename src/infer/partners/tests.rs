use super::*;

#[test]
fn a_partner_ends_a_single_life() {
    for (memory, fact) in [
        (
            "Ich bin Single",
            "Ich habe jetzt eine Freundin, sie heißt Lena",
        ),
        ("I'm single", "My new boyfriend Sam is a chef"),
        (
            "I'm single and honestly loving it",
            "I got married to Priya last weekend",
        ),
        ("Je suis célibataire", "Je me suis mariée en juin"),
        ("Soy soltera", "Tengo novio"),
        ("Ik ben vrijgezel", "Ik heb een nieuwe vriendin"),
        ("Je suis célibataire", "Ma femme s'appelle Inès"),
        ("Je suis célibataire", "Je me suis mariée avec Hugo en mai"),
        (
            "Ik ben vrijgezel",
            "Ik heb sinds kort een vriendin, ze heet Sanne",
        ),
        ("Ich bin ledig", "Ich habe endlich einen Freund"),
        // In a couple, without a partner word.
        ("Ik ben single", "Ik ben sinds kort samen met Eva"),
        ("Ich bin Single", "Ich bin seit Mai mit Lena zusammen"),
        ("Je suis célibataire", "Je suis en couple avec Hugo"),
        ("I'm single", "Eva and I are together now"),
        ("Sou solteira", "Estou namorando o Rui"),
        ("Ik ben vrijgezel", "Ik heb verkering met Lotte"),
        // No partner before.
        ("Ik heb geen vriend", "Ik heb een nieuwe vriend, Daan"),
        ("I'm not in a relationship", "I'm dating Mia now"),
        ("Ich habe keinen Freund", "Ich habe jetzt einen Freund"),
        // A time between.
        (
            "Ik ben vrijgezel",
            "Ik heb sinds de zomer een vriend, hij heet Joep",
        ),
    ] {
        assert!(ends_single_life(memory, fact), "{memory} / {fact}");
    }
    for (memory, fact) in [
        // Someone else's partner or wedding.
        ("I'm single", "My brother has a girlfriend"),
        ("I'm single", "My sister got married in June"),
        // Still single, or not single in the memory.
        ("I'm single", "I don't have a boyfriend"),
        ("I'm single", "Still single, and I have a new cat"),
        ("My sister is single", "I have a girlfriend"),
        ("I'm not single", "I have a girlfriend"),
        // A woman who is no wife.
        ("Je suis célibataire", "J'ai une femme de ménage le lundi"),
        // A friend made.
        (
            "Ik ben vrijgezel",
            "Ik heb een nieuwe vriend gemaakt op yoga",
        ),
        // Together on a trip, someone else's couple.
        ("Ik ben single", "Ik ben samen met Eva naar Parijs geweest"),
        ("I'm single", "We went to Rome together"),
        ("Ich bin Single", "Wir sind zusammen nach Rom gefahren"),
        ("I'm single", "My parents are together again"),
        ("Ik ben vrijgezel", "Mijn zus heeft verkering met Tom"),
        (
            "Je suis célibataire",
            "Mes parents sont en couple depuis 30 ans",
        ),
        // A partner's thing denied, or someone else's partner.
        (
            "I don't have a girlfriend's phone number",
            "I have a girlfriend now",
        ),
        ("My sister has no boyfriend", "I have a new boyfriend"),
        // Someone else's partner seen.
        ("Ik ben vrijgezel", "Ik heb de vriend van mijn zus gezien"),
    ] {
        assert!(!ends_single_life(memory, fact), "{memory} / {fact}");
    }
}

#[test]
fn a_friend_made_is_kept_beside_a_partner() {
    for (memory, fact) in [
        (
            "Mijn vriendin heet Julia",
            "Op de tennisclub heb ik een nieuwe vriend leren kennen, Thijs",
        ),
        ("My girlfriend is Zoe", "I made a new friend at yoga, Tom"),
        (
            "Mein Mann heißt Jonas",
            "Ich habe eine neue Freundin gemacht",
        ),
    ] {
        assert!(makes_a_friend(memory, fact), "{memory} / {fact}");
        assert!(!ends_partnership(memory, fact), "{memory} / {fact}");
    }
    for (memory, fact) in [
        // A partner met, no friend, or no partner in the memory.
        (
            "Mijn vriendin heet Julia",
            "Ik heb mijn nieuwe vriend leren kennen op de tennisclub",
        ),
        ("My girlfriend is Zoe", "I made pancakes with Tom"),
        ("I live in Leeds", "I made a new friend at yoga, Tom"),
    ] {
        assert!(!makes_a_friend(memory, fact), "{memory} / {fact}");
    }
}

#[test]
fn a_break_up_a_new_partner_or_a_wedding_ends_a_relationship() {
    for (memory, fact) in [
        // The relationship ended.
        (
            "Mijn vriend heet Bas, we wonen samen",
            "Bas en ik zijn uit elkaar",
        ),
        ("I'm married to Paul", "Paul and I divorced last year"),
        ("My girlfriend Ana is a nurse", "We broke up in March"),
        (
            "Mein Freund heißt Jonas",
            "Wir haben uns im Sommer getrennt",
        ),
        ("Mon copain s'appelle Léo", "J'ai quitté Léo"),
        (
            "Il mio ragazzo si chiama Luca",
            "Io e Luca ci siamo lasciati",
        ),
        ("My husband Tom is a pilot", "I'm single again"),
        // A new partner.
        ("Mijn vriend heet Bas", "Ik heb nu een nieuwe vriend, Joris"),
        (
            "My boyfriend Declan is a chef",
            "My new boyfriend Sam is a nurse",
        ),
        ("Mi novia se llama Carmen", "Tengo una nueva novia, Lucía"),
        ("My girlfriend is called Zoe", "I'm dating Mia now"),
        ("Mi novio se llama Pablo", "Ahora salgo con Andrés"),
        (
            "Mon copain s'appelle Julien",
            "Maintenant je sors avec Karim",
        ),
        ("Il mio ragazzo è Luca", "Adesso esco con Marco"),
        (
            "Ik heb een relatie met Tim",
            "Ik heb een nieuwe vriend, Daan",
        ),
        (
            "I'm in a relationship with Tim",
            "My new boyfriend Dan is great",
        ),
        (
            "Mijn vriend heet Tim",
            "Sinds een maand heb ik een nieuwe vriend, Daan",
        ),
        // A wedding after an engagement or a girlfriend.
        ("I'm engaged to Marco", "We got married in April"),
        (
            "My girlfriend Emma is a vet",
            "Emma and I tied the knot in June",
        ),
        ("Meine Freundin heißt Lena", "Lena und ich haben geheiratet"),
        ("Mi novia es Carmen", "Me casé con Carmen en mayo"),
        ("Mijn vriendin heet Eva", "Eva en ik zijn in juli getrouwd"),
        // In a couple with someone new, or no longer.
        ("Mijn vriendin heet Sanne", "Ik heb nu verkering met Lotte"),
        ("My boyfriend is Tim", "Rob and I are together now"),
        ("Ik ben samen met Eva", "Eva en ik zijn uit elkaar"),
        ("Mi novia se llama Lucía", "Lucía y yo lo dejamos en verano"),
        // Over with the partner named, or with someone now.
        ("Mijn partner heet Bram", "Het is uit met Bram"),
        ("My boyfriend Tim is a chef", "It's over with Tim"),
        ("Mon copain s'appelle Léo", "C'est fini avec Léo"),
        (
            "Mon copain s'appelle Hugo",
            "Hugo et moi, c'est fini depuis mai",
        ),
        ("My boyfriend is Tom", "Tom and me, it's over"),
        ("Mein Freund heißt Jonas", "Mit Jonas ist es aus"),
        ("Mijn partner heet Bram", "Ik ben nu met Koen"),
        ("My girlfriend is Zoe", "I'm with Mia now"),
        // The partner broke up; engaged to someone new; a couple with someone new.
        ("Mijn vriend heet Bas", "Bas heeft het uitgemaakt"),
        ("My boyfriend Tom is a chef", "Tom broke up with me"),
        ("Meine Freundin heißt Lena", "Lena hat Schluss gemacht"),
        ("Mijn vriend heet Bas", "Ik ben verloofd met Pieter"),
        ("My girlfriend is Zoe", "I got engaged to Mia"),
        ("Mijn vriend heet Bas", "Joris en ik zijn een stel"),
        ("My girlfriend is Zoe", "Sara and I are a couple now"),
        // No longer with the partner, or together.
        ("Mi novio se llama Javier", "Ya no estoy con Javier"),
        ("My boyfriend Tom is a chef", "I'm not with Tom anymore"),
        ("Mon copain s'appelle Léo", "Je ne suis plus avec Léo"),
        (
            "Mein Freund heißt Jonas",
            "Ich bin nicht mehr mit Jonas zusammen",
        ),
        ("O meu namorado é o Tiago", "Já não estou com o Tiago"),
        ("Il mio ragazzo si chiama Marco", "Non sto più con Marco"),
        ("Mijn vriendin heet Sanne", "We zijn niet meer samen"),
        // The partner named anew, or the relationship of some years.
        ("My boyfriend is Tim", "Dan is my boyfriend"),
        ("Mijn vriend heet Tim", "Mijn vriend Daan is kok"),
        (
            "Ik heb al twee jaar een relatie met Tim",
            "Ik heb een nieuwe vriend, Daan",
        ),
        // A name that is a word of denial elsewhere.
        ("Mijn vriend heet Ruben", "Mijn nieuwe vriend Sem is kok"),
        // A relationship with someone the memory does not name; a "vriendje".
        (
            "Mijn vriend heet Joris",
            "Ik heb sinds mei een relatie met Pieter",
        ),
        ("My girlfriend is Zoe", "I'm in a relationship with Mia"),
        (
            "Mijn vriendje Ruben is kok",
            "Ik heb een nieuwe vriend, Bram",
        ),
        (
            "Mijn vriendin heet Eva",
            "Mijn nieuwe vriendinnetje heet Lies",
        ),
    ] {
        assert!(!makes_a_friend(memory, fact), "{memory} / {fact}");
        assert!(ends_partnership(memory, fact), "{memory} / {fact}");
    }
    for (memory, fact) in [
        // Someone else's break-up, partner or wedding.
        (
            "My wife Sara is a teacher",
            "My sister broke up with her boyfriend",
        ),
        (
            "My wife Sara is a teacher",
            "My brother got married in June",
        ),
        (
            "My boyfriend Declan is a chef",
            "My friend has a new boyfriend",
        ),
        // Over for two others: the pair is not the speaker's.
        ("My boyfriend is Tom", "Tom and Mia, it's over"),
        // Not a break-up: a leg broken, time split, each other seen, a job left.
        ("My wife Sara is a teacher", "I broke my leg skiing"),
        (
            "My wife Sara is a teacher",
            "I split my time between Leeds and York",
        ),
        ("Mijn vriendin heet Eva", "We zien elkaar elke dag"),
        ("My wife Sara is a teacher", "I left my job in May"),
        ("Mon copain s'appelle Léo", "J'ai quitté mon travail"),
        // The same partner, a friend made, a denial.
        (
            "My boyfriend is Sam",
            "My new boyfriend Sam cooks every night",
        ),
        (
            "Mijn vriendin Lotte en ik wonen in Utrecht",
            "Ik heb op mijn werk een nieuwe vriend gemaakt, Thijs",
        ),
        ("Mijn vriendin heet Eva", "Ik heb een nieuwe vriend gemaakt"),
        (
            "My wife Sara is a teacher",
            "We never split up, despite everything",
        ),
        // A wedding ahead, a name, or no partner before it.
        ("I'm engaged to Marco", "We're getting married next spring"),
        ("My girlfriend Emma is a vet", "I had dinner with Marie"),
        ("I'm married to Paul", "We got married in 2010"),
        ("I collect vinyl records", "We got married in April"),
        ("My ex-boyfriend lives in Leeds", "I'm dating Mia now"),
        ("My sister is in a relationship", "I'm dating Mia now"),
        (
            "Mijn zus heeft een relatie",
            "Ik heb een nieuwe vriend, Daan",
        ),
        ("My girlfriend Emma is a vet", "I'm on the case"),
        // Together with the same partner.
        ("My boyfriend is Tim", "Tim and I are together again"),
        ("My boyfriend is Tim", "We've been together for five years"),
        (
            "Mijn vriendin heet Sanne",
            "Sanne en ik zijn al drie jaar samen",
        ),
        // Over, but not with the partner; with someone, but not now or not alone.
        ("Mijn partner heet Bram", "Bram is uit Leiden vertrokken"),
        ("My boyfriend Tim is a chef", "The match is over, Tim won"),
        (
            "My boyfriend Tim is a chef",
            "It's over with Ana, my old boss",
        ),
        ("My girlfriend is Zoe", "I'm with Mia at the cinema now"),
        ("Mi novio se llama Pablo", "Esta noche salgo con Marta"),
        ("Mi novio se llama Pablo", "Ahora salgo con Marta a correr"),
        ("Il mio ragazzo è Luca", "Adesso mia sorella esce con Marco"),
        (
            "Mon copain s'appelle Julien",
            "Maintenant tu sors avec Karim",
        ),
        ("My girlfriend is Zoe", "I'm with Mia"),
        // Someone else's break-up, engagement or couple.
        (
            "My boyfriend Tom is a chef",
            "Tom's sister broke up with Sam",
        ),
        ("My girlfriend is Zoe", "My brother got engaged to Mia"),
        ("My girlfriend is Zoe", "Mia and Sam are a couple"),
        ("Mijn vriend heet Bas", "Bas en ik zijn een stel"),
        // No longer with someone else, or no longer doing something together.
        ("Mi novio se llama Javier", "Ya no trabajo con Pedro"),
        (
            "My boyfriend Tom is a chef",
            "I don't play with Sam anymore",
        ),
        (
            "My boyfriend Tom is a chef",
            "I don't work with Tom anymore",
        ),
        (
            "Mi novio se llama Javier",
            "Ya no juego al pádel con Javier",
        ),
        ("Mijn vriendin heet Sanne", "We sporten niet meer samen"),
        (
            "Mi novio se llama Javier",
            "Ya estoy con Javier desde hace años",
        ),
        ("My sister is in a relationship", "I'm not with Tom anymore"),
        // A partner named beside someone else, or first named.
        (
            "My boyfriend is Tim",
            "Sunday brunch with my boyfriend and his friend Dan",
        ),
        ("I have a boyfriend", "My boyfriend Dan is a chef"),
        ("My boyfriend is Tim", "My boyfriend Tim is a chef"),
        ("My boyfriend is Tim", "My boyfriend is Italian"),
        // A relationship with the same partner, or someone else's friend.
        (
            "Mijn vriend heet Joris",
            "Ik heb al twee jaar een relatie met Joris",
        ),
        (
            "Mijn vriendin heet Eva",
            "Mijn zoon speelt met zijn vriendje Tim",
        ),
    ] {
        assert!(!ends_partnership(memory, fact), "{memory} / {fact}");
    }
}
